# ibex_devinfo end to end: the list names udp:lo and shm with their providers, -d udp:lo
# reports what the soft provider carries and the loopback address its QPs take, --json
# parses (shm has no network address to show), and an unknown device or option is refused with a message and a non-zero status.
execute_process(COMMAND ${DEVINFO} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "listing failed (${rc}): ${err}")
endif()
if(NOT out MATCHES "udp:lo +soft" OR NOT out MATCHES "shm +shm")
  message(FATAL_ERROR "the list lacks udp:lo (soft) or shm (shm):\n${out}")
endif()

execute_process(COMMAND ${DEVINFO} -d udp:lo RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "-d udp:lo failed (${rc}): ${err}")
endif()
foreach(line "max_msg_sz:[ \t]+2147483648" "max_mtu:[ \t]+4096 \\(5\\)" "efficient_msg_sz:[ \t]+[0-9]+"
             "address:[ \t]+127\\.0\\.0\\.[0-9]+ udp 4791")
  if(NOT out MATCHES "${line}")
    message(FATAL_ERROR "-d udp:lo lacks \"${line}\":\n${out}")
  endif()
endforeach()

execute_process(COMMAND ${DEVINFO} -d shm --json RESULT_VARIABLE rc OUTPUT_VARIABLE json ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "-d shm --json failed (${rc}): ${err}")
endif()
string(JSON dev ERROR_VARIABLE jerr GET "${json}" device)
string(JSON max ERROR_VARIABLE jerr2 GET "${json}" max_msg_size)
string(JSON eff ERROR_VARIABLE jerr3 GET "${json}" efficient_msg_bytes)
string(JSON addr ERROR_VARIABLE jerr4 GET "${json}" address)
if(jerr OR jerr2 OR jerr3 OR jerr4 OR NOT dev STREQUAL "shm" OR NOT max EQUAL 2147483648 OR eff LESS 4096
   OR NOT addr STREQUAL "")
  message(FATAL_ERROR "unexpected --json: ${json}")
endif()

execute_process(COMMAND ${DEVINFO} --json RESULT_VARIABLE rc OUTPUT_VARIABLE json ERROR_VARIABLE err)
string(JSON n ERROR_VARIABLE jerr LENGTH "${json}")
if(NOT rc EQUAL 0 OR jerr OR n LESS 2)
  message(FATAL_ERROR "the --json list (${rc}) does not parse or names fewer than 2 devices: ${json}")
endif()

execute_process(COMMAND ${DEVINFO} -d nosuch:dev0 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "nosuch:dev0" OR NOT err MATCHES "udp:lo")
  message(FATAL_ERROR "an unknown device was not refused with the devices there are (${rc}): ${err}")
endif()
execute_process(COMMAND ${DEVINFO} --bogus RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "usage")
  message(FATAL_ERROR "a bad option was not refused with the usage (${rc}): ${err}")
endif()
