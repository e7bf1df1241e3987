// What one call costs the process: CPU time, and how far it raised the peak of
// resident memory above where it started. The peak is the kernel's own
// high-water mark (VmHWM), reset through /proc/self/clear_refs first, so it
// catches a spike a sampler would miss; Linux only.
import { readFileSync, writeFileSync } from "node:fs";

const status = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync("/proc/self/status", "utf8"))![1]) * 1024;

export function cost<T>(fn: () => T): { result: T; cpuMs: number; peakBytes: number } {
  writeFileSync("/proc/self/clear_refs", "5");
  const rss = status("VmRSS");
  const cpu = process.cpuUsage();
  const result = fn();
  const used = process.cpuUsage(cpu);
  return { result, cpuMs: (used.user + used.system) / 1000, peakBytes: Math.max(0, status("VmHWM") - rss) };
}
