// The live feed's picture of what runs right now: one arrow per tab that
// runs something, side by side, coloured by backend, flowing while it runs
// (still under prefers-reduced-motion). At most MAX_ARROWS are drawn; the
// rest are counted in words beside them.
import type { Counts } from "../../live/schema";
import { backendName, presetName } from "../../live/words";
import { fitCanvas } from "./canvas";

const MAX_ARROWS = 60;
const ROW = 9;
const GAP = 3;
const WORDS = { train: "training", finetune: "fine-tuning", sample: "sampling" } as const;

export class ArrowsView {
  private arrows: { backend: string }[] = [];
  private more = 0;
  private frame = 0;
  private readonly still = matchMedia("(prefers-reduced-motion: reduce)");

  constructor(private canvas: HTMLCanvasElement) {
    new ResizeObserver(() => this.draw(performance.now())).observe(canvas);
  }

  show(counts: Counts | null): void {
    const active = counts?.active ?? [];
    // Grouped by backend, then work and size, so like arrows lie together and keep their places.
    const sorted = [...active].sort((a, b) => `${a.backend}/${a.work}/${a.preset}`.localeCompare(`${b.backend}/${b.work}/${b.preset}`));
    this.arrows = sorted.flatMap((g) => Array.from({ length: g.n }, () => ({ backend: g.backend })));
    const total = this.arrows.length;
    this.more = Math.max(0, total - MAX_ARROWS);
    this.arrows.length = Math.min(total, MAX_ARROWS);
    this.canvas.setAttribute("aria-label", describe(active));
    this.canvas.style.height = `${Math.max(1, this.arrows.length) * (ROW + GAP) + GAP}px`;
    cancelAnimationFrame(this.frame);
    this.frame = requestAnimationFrame((t) => this.tick(t));
  }

  private tick(t: number): void {
    this.draw(t);
    if (this.arrows.length && !this.still.matches) this.frame = requestAnimationFrame((next) => this.tick(next));
  }

  private draw(t: number): void {
    const { ctx, width: W } = fitCanvas(this.canvas);
    const style = getComputedStyle(this.canvas);
    ctx.font = "11px system-ui, sans-serif";
    if (!this.arrows.length) {
      ctx.fillStyle = style.color;
      ctx.fillText("Nothing runs in the feed right now.", 2, ROW);
      return;
    }
    const colour = (backend: string) => style.getPropertyValue(`--live-${backend}`).trim() || style.color;
    const head = ROW;
    const x0 = 2;
    const x1 = W - 2 - (this.more ? ctx.measureText(`+${this.more} more`).width + 8 : 0);
    // Dashes flow right at 40 px/s: each arrow is a workload in flight.
    const offset = this.still.matches ? 0 : -((t / 25) % 16);
    this.arrows.forEach((a, i) => {
      const y = GAP + i * (ROW + GAP) + ROW / 2;
      ctx.strokeStyle = ctx.fillStyle = colour(a.backend);
      ctx.lineWidth = 3;
      ctx.setLineDash([10, 6]);
      ctx.lineDashOffset = offset;
      ctx.beginPath();
      ctx.moveTo(x0, y);
      ctx.lineTo(x1 - head, y);
      ctx.stroke();
      ctx.setLineDash([]);
      ctx.beginPath();
      ctx.moveTo(x1, y);
      ctx.lineTo(x1 - head, y - ROW / 2);
      ctx.lineTo(x1 - head, y + ROW / 2);
      ctx.closePath();
      ctx.fill();
    });
    if (this.more) {
      ctx.fillStyle = style.color;
      ctx.fillText(`+${this.more} more`, x1 + 8, GAP + ROW);
    }
  }
}

/** The counts in words: "2 training Tiny on WASM, 1 sampling Huge on WebGPU". */
export function describe(active: Counts["active"]): string {
  if (!active.length) return "Nothing runs in the feed right now.";
  return active.map((g) => `${g.n} ${WORDS[g.work]} ${presetName(g.preset) ?? "custom"} on ${backendName(g.backend)}`).join(", ");
}
