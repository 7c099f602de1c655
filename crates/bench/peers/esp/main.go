// The Go peer of `fastpath bench esp`: the four filter programs of Table 1
// of Xu, Kumar and Li, "Fast Paths in Concurrent Programs" (PACT 2004), each
// filter a goroutine, the filters joined by unbuffered channels, a byte a
// message and the end of a stream a marker, the same algorithms as the ESP
// filters in crates/esp/programs/ (defined in docs/esp.md).
//
// Usage: esp-peer PROGRAM INPUT EXPECTED ITERATIONS ROUNDS
//
// Runs ITERATIONS streams of the bytes in file INPUT through program PROGRAM
// (1 to 4) per round, checks every output against the file EXPECTED, and
// prints "ns_per_stream N", the best round's wall time per stream. The
// pipeline is started once; streams follow each other through it.
package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// msg is a byte (ok) or the end of a stream (!ok).
type msg struct {
	b  byte
	ok bool
}

var end = msg{}

func evener(in <-chan msg, out chan<- msg) {
	odd := false
	for m := range in {
		if m.ok {
			odd = !odd
			out <- m
			continue
		}
		if odd {
			out <- msg{0, true}
		}
		odd = false
		out <- end
	}
	close(out)
}

func swap(in <-chan msg, out chan<- msg) {
	var held byte
	have := false
	for m := range in {
		if m.ok {
			if have {
				have = false
				out <- m
				out <- msg{held, true}
			} else {
				have = true
				held = m.b
			}
			continue
		}
		if have {
			out <- msg{held, true}
		}
		have = false
		out <- end
	}
	close(out)
}

func crc32(in <-chan msg, out chan<- msg) {
	crc := uint32(0xFFFFFFFF)
	for m := range in {
		if m.ok {
			crc ^= uint32(m.b)
			for k := 0; k < 8; k++ {
				crc = (crc >> 1) ^ (0xEDB88320 & -(crc & 1))
			}
			out <- m
			continue
		}
		c := crc ^ 0xFFFFFFFF
		for k := 0; k < 4; k++ {
			out <- msg{byte(c >> (8 * k)), true}
		}
		crc = 0xFFFFFFFF
		out <- end
	}
	close(out)
}

func rle(in <-chan msg, out chan<- msg) {
	var cur byte
	count := 0
	for m := range in {
		if m.ok {
			if count != 0 && m.b == cur && count < 255 {
				count++
			} else {
				n, v := count, cur
				cur, count = m.b, 1
				if n != 0 {
					out <- msg{byte(n), true}
					out <- msg{v, true}
				}
			}
			continue
		}
		if count != 0 {
			out <- msg{byte(count), true}
			out <- msg{cur, true}
		}
		count = 0
		out <- end
	}
	close(out)
}

func rld(in <-chan msg, out chan<- msg) {
	var count byte
	have := false
	for m := range in {
		if m.ok {
			if have {
				have = false
				for k := byte(0); k < count; k++ {
					out <- m
				}
			} else {
				have = true
				count = m.b
			}
			continue
		}
		have = false
		out <- end
	}
	close(out)
}

func pes(in <-chan msg, out chan<- msg) {
	for m := range in {
		if m.ok && (m.b == 0x7E || m.b == 0x7D) {
			out <- msg{0x7D, true}
			out <- msg{m.b ^ 0x20, true}
			continue
		}
		out <- m
	}
	close(out)
}

var programs = map[int][]func(<-chan msg, chan<- msg){
	1: {evener, swap, crc32},
	2: {rle, swap, pes},
	3: {rle, swap, pes, pes, swap, rld},
	4: {crc32, swap, pes, pes, swap, rld},
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "esp-peer: "+format+"\n", args...)
	os.Exit(2)
}

func main() {
	if len(os.Args) != 6 {
		fail("usage: esp-peer PROGRAM INPUT EXPECTED ITERATIONS ROUNDS")
	}
	prog, err := strconv.Atoi(os.Args[1])
	filters, found := programs[prog]
	if err != nil || !found {
		fail("no program %q (1 to 4)", os.Args[1])
	}
	input, err := os.ReadFile(os.Args[2])
	if err != nil {
		fail("%v", err)
	}
	expected, err := os.ReadFile(os.Args[3])
	if err != nil {
		fail("%v", err)
	}
	iterations, err1 := strconv.Atoi(os.Args[4])
	rounds, err2 := strconv.Atoi(os.Args[5])
	if err1 != nil || err2 != nil || iterations < 1 || rounds < 1 {
		fail("ITERATIONS and ROUNDS must be positive integers")
	}

	// ReadFromArray, the filters, WriteToArray.
	streams := make(chan []byte)
	results := make(chan []byte)
	first := make(chan msg)
	go func() {
		for s := range streams {
			for _, b := range s {
				first <- msg{b, true}
			}
			first <- end
		}
		close(first)
	}()
	var in <-chan msg = first
	for _, f := range filters {
		out := make(chan msg)
		go f(in, out)
		in = out
	}
	go func(in <-chan msg) {
		var got []byte
		for m := range in {
			if m.ok {
				got = append(got, m.b)
				continue
			}
			results <- got
			got = nil
		}
		close(results)
	}(in)

	best := time.Duration(1<<63 - 1)
	for r := 0; r < rounds; r++ {
		start := time.Now()
		for i := 0; i < iterations; i++ {
			streams <- input
			if got := <-results; !bytes.Equal(got, expected) {
				fail("program %d: output (%d bytes) differs from the reference (%d bytes)", prog, len(got), len(expected))
			}
		}
		if d := time.Since(start); d < best {
			best = d
		}
	}
	close(streams)
	fmt.Printf("ns_per_stream %.1f\n", float64(best.Nanoseconds())/float64(iterations))
}
