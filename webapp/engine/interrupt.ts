// Abandoning a step from outside the thread that runs it. The worker's message
// queue is no use while a backend computes: a CPU step runs to its end before
// any message is read, and a Huge step on the CPU takes about 30 s. So the page
// also writes its request (pause, stop, ...) into an Int32Array over a
// SharedArrayBuffer, and a backend that takes long reads it between the
// operations of a step, abandoning the step before the optimizer update: the
// weights, moments and step count stay as they were.

/** A step, loss or next-token pass abandoned because the interrupt flag was set; nothing changed. */
export class Interrupted extends Error {
  constructor() {
    super("interrupted by a request from the page");
    this.name = "Interrupted";
  }
}

/** Throws Interrupted when `flag` (slot 0) holds a request. */
export function checkInterrupt(flag: Int32Array | undefined): void {
  if (flag && Atomics.load(flag, 0) !== 0) throw new Interrupted();
}
