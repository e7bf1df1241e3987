// The "Power user?" nudge: in Chromium, where chrome://flags#enable-unsafe-webgpu would give this
// page something it can use, say so once, until dismissed (remembered in localStorage). Two cases:
// no WebGPU at all (on Linux, Chromium offers it only behind that flag: training would leave the
// CPU), or WebGPU without the experimental features the flag exposes (none named
// chromium-experimental-* is listed) while a shipped lever needs one (coop-matrix: the matrix
// units). With the flag on and still no such feature, the GPU lacks it and nothing is said.
import facts from "../../tinygpt/facts.json";
import type { Caps } from "../worker/protocol";
import { $ } from "./dom";

const KEY = "tinygpt.nudge.unsafe-webgpu";
const FLAG = "chrome://flags#enable-unsafe-webgpu";
const EXPERIMENTAL = "chromium-experimental-";
let dismissedHere = false; // where storage is refused, the dismissal still holds for this page

/** Whether this is a Chromium-based browser (the only ones with that flag). */
export function isChromium(nav: Navigator = navigator): boolean {
  const brands = (nav as Navigator & { userAgentData?: { brands: { brand: string }[] } }).userAgentData?.brands;
  return brands?.some((b) => b.brand === "Chromium") ?? false;
}

/** What the flag would unlock here, in words, or null where it would not help. */
export function nudgeText(caps: Caps, chromium: boolean): string | null {
  if (!chromium) return null;
  if (!caps.webgpu) return `This browser offers no WebGPU, so training runs on the CPU. Where Chromium keeps WebGPU behind a flag (on Linux, for one), turning on ${FLAG} and reloading lets TinyGPT train on your GPU.`;
  if (caps.features.some((f) => f.startsWith(EXPERIMENTAL))) return null;
  const locked = facts.levers.filter((l) => l.status === "shipped" && l.feature?.startsWith(EXPERIMENTAL) && !caps.features.includes(l.feature));
  if (!locked.length) return null;
  return `Chromium keeps some GPU features behind ${FLAG}: with it on (and a reload), TinyGPT can check ${locked.map((l) => `${l.pill} (${l.feature})`).join(", ")} on this GPU and use it if it passes the numerics gate. The flag turns on experimental WebGPU for every site, not only this one.`;
}

function dismissed(): boolean {
  try {
    return dismissedHere || localStorage.getItem(KEY) === "dismissed";
  } catch {
    return dismissedHere; // storage refused (a privacy mode)
  }
}

/** Shows or hides the nudge for these caps; its button dismisses it for good. */
export function showNudge(caps: Caps): void {
  const box = $("#nudge");
  const text = nudgeText(caps, isChromium());
  box.hidden = text === null || dismissed();
  $("#nudge-text", box).textContent = text ?? "";
  $("#nudge-dismiss", box).onclick = () => {
    dismissedHere = true;
    try {
      localStorage.setItem(KEY, "dismissed");
    } catch {
      // not remembered past this page
    }
    box.hidden = true;
  };
}
