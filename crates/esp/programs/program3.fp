// The fast path of program3.esp (§6.1): the per-byte steady state of the
// whole chain. Every process starts at the top of its loop (ReadFromArray at
// #1, where it rests once it has sent a byte; each filter at its `in`) and
// repeats it; where
// a process reaches its end-of-stream stage (#1, ReadFromArray's #2) the path
// exits, leaving that stage, once per stream, to the process-based code.
// 2ByteSwap and RLD alternate between storing a byte (#3) and emitting (#2):
// the path follows that alternation from whichever comes first (the path may
// be entered in the middle of a pair), so that symbolic execution does not
// explore sequences the filter cannot take. PES's escape (#2) is the rare
// case: it leaves the path to the process-based code.
fastpath stream {
  // Each byte drains through the chain before the source reads the next
  // (docs/esp.md): under the default policy the interleavings of these
  // eight filters give about 7,000 control states and 33,000 instructions,
  // downstream-first about 1,000 and 4,000-6,000.
  schedule downstream;
  process ReadFromArray { statement #1, #2; start #1; follows #1*; exit #2; }
  process RLE { statement c1, #1; start c1; follows c1*; exit #1; }
  process TwoByteSwap1 { statement c2, #1, #2, #3; start c2; follows (#3 c2 #2 c2)* (#3 c2)? | (#2 c2 #3 c2)* (#2 c2)?; exit #1; }
  process PES1 { statement c3, #1, #2; start c3; follows c3*; exit #1; }
  process PES2 { statement c4, #1, #2; start c4; follows c4*; exit #1; }
  process TwoByteSwap2 { statement c5, #1, #2, #3; start c5; follows (#3 c5 #2 c5)* (#3 c5)? | (#2 c5 #3 c5)* (#2 c5)?; exit #1; }
  process RLD { statement c6, #1, #2, #3; start c6; follows (#3 c6 #2 c6)* (#3 c6)? | (#2 c6 #3 c6)* (#2 c6)?; exit #1; }
  process WriteToArray { statement c7, #1; start c7; follows c7*; exit #1; }
}
