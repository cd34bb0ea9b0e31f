set terminal pngcairo noenhanced size 720,420 font ',9'
set output 'docs/examples/check-4ranks/busbw.png'
set title 'zt check: busbw against size (4 ranks, mpi)'
set logscale x 2
set format x '%.0b%BB'
set xlabel 'size (bytes)'
set ylabel 'busbw (GB/s)'
set key top left
set grid
plot 'docs/examples/check-4ranks/busbw.dat' index 0 using 1:2 with linespoints title 'all_reduce', \
     'docs/examples/check-4ranks/busbw.dat' index 1 using 1:2 with linespoints title 'all_gather', \
     'docs/examples/check-4ranks/busbw.dat' index 2 using 1:2 with linespoints title 'reduce_scatter', \
     'docs/examples/check-4ranks/busbw.dat' index 3 using 1:2 with linespoints title 'broadcast', \
     'docs/examples/check-4ranks/busbw.dat' index 4 using 1:2 with linespoints title 'sendrecv'
reset
set terminal pngcairo noenhanced size 520,460 font ',9'
set output 'docs/examples/check-4ranks/pairs.png'
set title "pair bandwidth, GB/s per direction (16M exchanges)\nred: slowest, blue: fastest; boxed: the slowest pair"
set xtics ('0 vm' 0, '1 vm' 1, '2 vm' 2, '3 vm' 3) rotate by 30 right
set ytics ('0 vm' 0, '1 vm' 1, '2 vm' 2, '3 vm' 3)
set xrange [-0.5:3.5]
set yrange [3.5:-0.5]
set xlabel 'node'
set ylabel 'node'
set size ratio -1
unset key
set object 1 rect from -0.5,-0.5 to 0.5,0.5 fc rgb '#dddddd' fs solid 1.0 noborder
set label 2 '-' at 0,0 center front
set object 2 rect from 0.5,-0.5 to 1.5,0.5 fc rgb '#286baf' fs solid 1.0 noborder
set label 3 '10.63' at 1,0 center front
set object 3 rect from 1.5,-0.5 to 2.5,0.5 fc rgb '#2166ac' fs solid 1.0 noborder
set label 4 '10.74' at 2,0 center front
set object 4 rect from 2.5,-0.5 to 3.5,0.5 fc rgb '#286bae' fs solid 1.0 noborder
set label 5 '10.63' at 3,0 center front
set object 5 rect from -0.5,0.5 to 0.5,1.5 fc rgb '#286baf' fs solid 1.0 noborder
set label 6 '10.63' at 0,1 center front
set object 6 rect from 0.5,0.5 to 1.5,1.5 fc rgb '#dddddd' fs solid 1.0 noborder
set label 7 '-' at 1,1 center front
set object 7 rect from 1.5,0.5 to 2.5,1.5 fc rgb '#b31b2e' fs solid 1.0 noborder
set label 8 '4.44' at 2,1 center front
set object 8 rect from 2.5,0.5 to 3.5,1.5 fc rgb '#b41d30' fs solid 1.0 noborder
set label 9 '4.46' at 3,1 center front
set object 9 rect from -0.5,1.5 to 0.5,2.5 fc rgb '#2166ac' fs solid 1.0 noborder
set label 10 '10.74' at 0,2 center front
set object 10 rect from 0.5,1.5 to 1.5,2.5 fc rgb '#b31b2e' fs solid 1.0 noborder
set label 11 '4.44' at 1,2 center front
set object 11 rect from 1.5,1.5 to 2.5,2.5 fc rgb '#dddddd' fs solid 1.0 noborder
set label 12 '-' at 2,2 center front
set object 12 rect from 2.5,1.5 to 3.5,2.5 fc rgb '#b2182b' fs solid 1.0 border lc rgb 'black' lw 3
set label 13 '4.39' at 3,2 center front
set object 13 rect from -0.5,2.5 to 0.5,3.5 fc rgb '#286bae' fs solid 1.0 noborder
set label 14 '10.63' at 0,3 center front
set object 14 rect from 0.5,2.5 to 1.5,3.5 fc rgb '#b41d30' fs solid 1.0 noborder
set label 15 '4.46' at 1,3 center front
set object 15 rect from 1.5,2.5 to 2.5,3.5 fc rgb '#b2182b' fs solid 1.0 border lc rgb 'black' lw 3
set label 16 '4.39' at 2,3 center front
set object 16 rect from 2.5,2.5 to 3.5,3.5 fc rgb '#dddddd' fs solid 1.0 noborder
set label 17 '-' at 3,3 center front
plot NaN notitle
