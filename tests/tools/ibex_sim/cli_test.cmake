# ibex_sim end to end: --json has the keys the issue names, --out writes the CSVs and the
# plots, hierarchical runs on a random placement, a bad option is refused with a message.
file(REMOVE_RECURSE ${OUT})
execute_process(COMMAND ${SIM} --topology leaf-spine --hosts 16 --hosts-per-leaf 4 --link-gbps 100
                        --collective ring --bytes 1M --json --no-progress
                RESULT_VARIABLE rc OUTPUT_VARIABLE json ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ibex_sim failed (${rc}): ${err}")
endif()
foreach(key hosts events wall_s sim_time_s collective_time_s busbw_gbps)
  string(JSON v ERROR_VARIABLE jerr GET "${json}" ${key})
  if(jerr)
    message(FATAL_ERROR "--json lacks ${key}: ${json}")
  endif()
endforeach()
string(JSON hosts GET "${json}" hosts)
string(JSON busbw GET "${json}" busbw_gbps)
if(NOT hosts EQUAL 16 OR busbw LESS 10)
  message(FATAL_ERROR "unexpected result: ${json}")
endif()
execute_process(COMMAND ${SIM} --topology star --hosts 17 --link-gbps 100 --flows incast:16:256K
                        --dcqcn paper --out ${OUT} --no-progress
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "incast run failed (${rc}): ${err}")
endif()
foreach(f summary.json ports.csv queues.csv rates.csv counters.csv qps.csv flows.csv)
  if(NOT EXISTS ${OUT}/${f})
    message(FATAL_ERROR "--out did not write ${f}")
  endif()
endforeach()
find_program(GNUPLOT gnuplot)
if(GNUPLOT AND NOT EXISTS ${OUT}/queue.png)
  message(FATAL_ERROR "gnuplot is here but queue.png was not drawn")
endif()
# Flow sizes from a CDF file on a fat-tree, for a fixed simulated time.
file(WRITE ${OUT}/sizes.cdf "1000 0\n1000 50\n100000 90\n1000000 100\n")
execute_process(COMMAND ${SIM} --topology fat-tree --hosts 16 --link-gbps 100 --flows cdf:${OUT}/sizes.cdf:0.4
                        --duration-us 300 --json --no-progress
                RESULT_VARIABLE rc OUTPUT_VARIABLE json ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cdf run failed (${rc}): ${err}")
endif()
string(JSON done GET "${json}" flows_done)
if(done LESS 10)
  message(FATAL_ERROR "too few CDF flows finished: ${json}")
endif()
# Hierarchical, the communicator's own builder, on 4 hosts x 2 ranks placed at random.
execute_process(COMMAND ${SIM} --topology leaf-spine --hosts 4 --hosts-per-leaf 2 --link-gbps 100
                        --collective hierarchical --ranks-per-host 2 --placement random --bytes 1M
                        --json --no-progress
                RESULT_VARIABLE rc OUTPUT_VARIABLE json ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "hierarchical run failed (${rc}): ${err}")
endif()
string(JSON busbw GET "${json}" busbw_gbps)
if(busbw LESS 1)
  message(FATAL_ERROR "unexpected hierarchical result: ${json}")
endif()
execute_process(COMMAND ${SIM} --hosts 4 --frobnicate 1 RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(rc EQUAL 0 OR NOT err MATCHES "--frobnicate: unknown option")
  message(FATAL_ERROR "a bad option was not refused clearly: ${err}")
endif()
