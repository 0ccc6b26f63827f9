# Goodput against loss for the soft RoCEv2 engine (go-back-N, selective) and TCP.
# gnuplot -e "csv='goodput.csv'; png='goodput.png'" goodput.gp
set terminal pngcairo size 900,560 font ",11"
set output png
set datafile separator ","
set title "64 KiB goodput against loss (ibex: udp:lo, IBEX_FAULT_LOSS on both ends; TCP: veth); 0 % drawn at 0.005"
set xlabel "packet loss (%)"
set ylabel "goodput (Gb/s)"
set logscale x
set xrange [0.005:5]
set key top right
set grid
# Loss 0 cannot sit on a log axis: it is drawn at 0.005 %.
x(l) = (l > 0 ? l : 0.005)
plot csv using (strcol(1) eq "ibex-gbn" ? x($2) : 1/0):3:4:5 with yerrorlines lw 2 title "ibex go-back-N", \
     csv using (strcol(1) eq "ibex-selective" ? x($2) : 1/0):3:4:5 with yerrorlines lw 2 title "ibex selective (IRN)", \
     csv using (strcol(1) eq "tcp" ? x($2) : 1/0):3:4:5 with yerrorlines lw 2 title "TCP (iperf3 over veth, random drop on egress)"
