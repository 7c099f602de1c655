module fastpath/bench/peers/esp

go 1.18
