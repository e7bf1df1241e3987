// Where keyboard focus goes after an action. Pressing Start, Pause, Generate
// and the like disables the pressed button for the state it starts (and a run's
// buttons in Saved runs are redrawn); the browser then drops focus to <body>,
// and a keyboard user has to find their place again. Instead, once the page
// settles, focus moves to the control most likely wanted next: Pause after
// Start, Resume after Pause, Stop while sampling. It never takes focus from
// anything the user chose: only while focus is on <body> and the control that
// last held it has become disabled or gone.

/** For each control, what to focus when it drops focus, first enabled wins; the control itself last. */
const NEXT: Record<string, string[]> = {
  "btn-start": ["#btn-pause", "#btn-start"],
  "btn-resume": ["#btn-pause", "#btn-resume", "#btn-start"],
  "btn-pause": ["#btn-resume", "#btn-start"],
  "btn-stop": ["#btn-start"],
  "btn-reset": ["#btn-start"],
  "btn-sample": ["#btn-sample-stop", "#btn-sample"],
  "btn-sample-stop": ["#btn-sample"],
  "import-file": ["#import-file"],
  "btn-gallery": ["#btn-gallery"],
};
const SAVED_RUN_RESUME = ["#btn-pause", "#btn-resume", "#btn-start"];
const SAVED_RUN_OTHER = ["#checkpoint-list button:not(:disabled)", "#btn-sample", "#btn-start"];

function candidates(el: HTMLElement): string[] | null {
  if (NEXT[el.id]) return NEXT[el.id];
  if (el.closest("#checkpoint-list")) return el.classList.contains("resume-run") ? SAVED_RUN_RESUME : SAVED_RUN_OTHER;
  return null;
}

export function keepFocus(root: HTMLElement): void {
  let last: { el: HTMLElement; next: string[] } | null = null;

  root.addEventListener("focusin", (e) => {
    const el = e.target as HTMLElement;
    const next = candidates(el);
    last = next ? { el, next } : null;
  });
  const settle = () => {
    if (!last || document.activeElement !== document.body) return;
    const gone = last.el as HTMLButtonElement;
    if (gone.isConnected && !gone.disabled) return;
    for (const selector of last.next) {
      const target = document.querySelector<HTMLButtonElement | HTMLInputElement>(selector);
      // The file input is drawn 1 px wide inside its label: it counts as shown.
      if (target && !target.disabled && target.getClientRects().length) {
        target.focus();
        return;
      }
    }
    // Nothing to go to yet (the worker is still loading): wait for the next change.
  };
  // Focus the user moves away (a click on the page, Tab out of the app) ends the watch. A button
  // that was just disabled blurs later, when the browser next updates the page: settle then.
  root.addEventListener("focusout", (e) => {
    const el = e.target as HTMLButtonElement | HTMLInputElement;
    if (last?.el !== el) return;
    if (el.disabled) queueMicrotask(settle);
    else last = null;
  });
  new MutationObserver(settle).observe(root, { subtree: true, childList: true, attributes: true, attributeFilter: ["disabled", "hidden"] });
}
