// What the TypeScript reader makes of .tinygpt files: one JSON line per file,
// the same summary `python -m tinygpt.checkpoint FILE...` prints, so the two
// readers can be compared on any file (tests/test_checkpoint_readers.py does).
// With --stats each line also gives the CPU time the reading took and how far
// it raised the process's peak memory (Linux): the tests' bounds and
// bench/bench_checkpoint.py read these.
//
//   node dist-cli/inspect.js [--stats] FILE...

import { cost } from "./cost";
import { verdict } from "./summary";

const args = process.argv.slice(2);
const stats = args[0] === "--stats";
for (const file of stats ? args.slice(1) : args) {
  if (!stats) {
    console.log(JSON.stringify({ file, ...verdict(file) }));
    continue;
  }
  const { result, cpuMs, peakBytes } = cost(() => verdict(file));
  console.log(JSON.stringify({ file, ...result, cpu_ms: cpuMs, peak_bytes: peakBytes }));
}
