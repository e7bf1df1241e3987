// The live loss chart on a <canvas>. Redraws at most once per frame, and
// reduces the train curve to one min/max/mean column per pixel, so drawing
// costs the same at 100 and at 100,000 points.
import type { HistoryPoint } from "../engine/types";
import { fitCanvas } from "./canvas";

const PAD = { left: 44, right: 10, top: 10, bottom: 22 };

export class LossChart {
  private steps: number[] = [];
  private train: number[] = [];
  private val: { step: number; loss: number }[] = [];
  private log = false;
  private queued = false;

  constructor(private canvas: HTMLCanvasElement) {
    new ResizeObserver(() => this.redraw()).observe(canvas);
  }

  get length(): number {
    return this.steps.length;
  }

  setLog(log: boolean): void {
    this.log = log;
    this.redraw();
  }

  reset(history: readonly HistoryPoint[]): void {
    this.steps = [];
    this.train = [];
    this.val = [];
    for (const p of history) this.add(p.step, p.train, p.val);
    this.redraw();
  }

  add(step: number, train: number, val?: number): void {
    const last = this.steps.length - 1;
    if (last < 0 || step > this.steps[last]) {
      this.steps.push(step);
      this.train.push(train);
    }
    if (val !== undefined && Number.isFinite(val)) this.val.push({ step, loss: val });
    this.redraw();
  }

  redraw(): void {
    if (this.queued) return;
    this.queued = true;
    requestAnimationFrame(() => {
      this.queued = false;
      this.draw();
    });
  }

  private draw(): void {
    const { ctx, width: W, height: H } = fitCanvas(this.canvas);
    const style = getComputedStyle(this.canvas);
    const ink = style.color || "#444";
    const trainColour = style.getPropertyValue("--app-accent").trim() || "#2f6fde";
    const valColour = style.getPropertyValue("--app-val").trim() || "#d9822b";
    ctx.font = "11px system-ui, sans-serif";
    ctx.fillStyle = ink;
    if (!this.steps.length) {
      ctx.fillText("The loss curve appears here once training starts.", PAD.left, H / 2);
      return;
    }

    const finite = (v: number) => Number.isFinite(v) && (!this.log || v > 0);
    let lo = Infinity;
    let hi = -Infinity;
    for (const v of this.train) if (finite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    for (const p of this.val) if (finite(p.loss)) { lo = Math.min(lo, p.loss); hi = Math.max(hi, p.loss); }
    if (!(hi >= lo)) return;
    if (hi - lo < 1e-6) { hi += 0.5; lo = Math.max(this.log ? 1e-3 : 0, lo - 0.5); }
    const f = (v: number) => (this.log ? Math.log(v) : v);
    const flo = f(lo);
    const fhi = f(hi);
    const x0 = this.steps[0];
    const x1 = Math.max(this.steps[this.steps.length - 1], x0 + 1);
    const plotW = W - PAD.left - PAD.right;
    const plotH = H - PAD.top - PAD.bottom;
    const px = (step: number) => PAD.left + ((step - x0) / (x1 - x0)) * plotW;
    const py = (v: number) => PAD.top + (1 - (f(v) - flo) / (fhi - flo)) * plotH;

    // Axes and a few labels.
    ctx.strokeStyle = ink;
    ctx.globalAlpha = 0.3;
    ctx.beginPath();
    ctx.moveTo(PAD.left, PAD.top);
    ctx.lineTo(PAD.left, PAD.top + plotH);
    ctx.lineTo(PAD.left + plotW, PAD.top + plotH);
    ctx.stroke();
    ctx.globalAlpha = 1;
    for (let i = 0; i <= 4; i++) {
      const v = this.log ? Math.exp(flo + ((fhi - flo) * i) / 4) : lo + ((hi - lo) * i) / 4;
      ctx.fillText(v.toFixed(2), 4, py(v) + 4);
    }
    ctx.fillText(String(x0), PAD.left, H - 6);
    const endLabel = String(this.steps[this.steps.length - 1]);
    ctx.fillText(endLabel, PAD.left + plotW - ctx.measureText(endLabel).width, H - 6);

    // Train: per pixel column the min..max band and a line through the means.
    const columns = Math.max(1, Math.floor(plotW));
    const mins = new Float64Array(columns).fill(Infinity);
    const maxs = new Float64Array(columns).fill(-Infinity);
    const sums = new Float64Array(columns);
    const counts = new Uint32Array(columns);
    for (let i = 0; i < this.steps.length; i++) {
      const v = this.train[i];
      if (!finite(v)) continue;
      const col = Math.min(columns - 1, Math.floor(((this.steps[i] - x0) / (x1 - x0)) * columns));
      mins[col] = Math.min(mins[col], v);
      maxs[col] = Math.max(maxs[col], v);
      sums[col] += v;
      counts[col]++;
    }
    ctx.strokeStyle = trainColour;
    ctx.globalAlpha = 0.35;
    ctx.beginPath();
    for (let col = 0; col < columns; col++) {
      if (!counts[col] || mins[col] === maxs[col]) continue;
      const x = PAD.left + col + 0.5;
      ctx.moveTo(x, py(maxs[col]));
      ctx.lineTo(x, py(mins[col]));
    }
    ctx.stroke();
    ctx.globalAlpha = 1;
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    let started = false;
    for (let col = 0; col < columns; col++) {
      if (!counts[col]) continue;
      const x = PAD.left + col + 0.5;
      const y = py(sums[col] / counts[col]);
      if (started) ctx.lineTo(x, y);
      else ctx.moveTo(x, y);
      started = true;
    }
    ctx.stroke();

    // Validation: few points, drawn as they are.
    ctx.strokeStyle = valColour;
    ctx.fillStyle = valColour;
    ctx.beginPath();
    this.val.forEach((p, i) => (i ? ctx.lineTo(px(p.step), py(p.loss)) : ctx.moveTo(px(p.step), py(p.loss))));
    ctx.stroke();
    for (const p of this.val) {
      ctx.beginPath();
      ctx.arc(px(p.step), py(p.loss), 2.5, 0, 2 * Math.PI);
      ctx.fill();
    }
    ctx.lineWidth = 1;
  }
}
