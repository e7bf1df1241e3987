// The app's loss chart on a page of its own, for bench/bench_app_chart.py:
// any number of synthetic points (a live run holds every point it trained;
// a .tinygpt file keeps at most max_history_points), then a redraw timed
// inside the animation frame it runs in.
import { LossChart } from "../webapp/app/chart";
import type { HistoryPoint } from "../webapp/engine/types";

const chart = new LossChart(document.querySelector("canvas")!);
let log = false;

Object.assign(window, {
  /** A decaying curve with noise (drawing cost does not depend on the values), val every 50 steps. */
  load(points: number): void {
    let seed = 1;
    const noise = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31 - 0.5) * 0.1;
    const history: HistoryPoint[] = Array.from({ length: points }, (_, i) => {
      const train = 1.5 + 4 * Math.exp(-(i + 1) / (points / 8)) + noise();
      return (i + 1) % 50 ? { step: i + 1, train } : { step: i + 1, train, val: train + 0.1 };
    });
    chart.reset(history);
  },
  // Animation-frame callbacks run in the order they were requested: one requested
  // before the flip, the chart's redraw (requested by the flip), one after. The
  // time between the first and the last is the redraw's share of that frame.
  async timedFlip(): Promise<number> {
    let start = 0;
    const before = new Promise<void>((r) => requestAnimationFrame(() => ((start = performance.now()), r())));
    log = !log;
    chart.setLog(log);
    const after = new Promise<number>((r) => requestAnimationFrame(() => r(performance.now())));
    await before;
    return (await after) - start;
  },
});
