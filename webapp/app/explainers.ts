// The explainers are embedded in the page by the build (hidden popover
// elements), so a pill or metric finds its explanation without a fetch.

export function explainerFor(key: string): HTMLElement | null {
  const k = key.toLowerCase();
  for (const node of document.querySelectorAll<HTMLElement>(".explainer")) {
    const names = [node.dataset.slug, node.dataset.pill, node.dataset.metric].map((s) => (s ?? "").toLowerCase());
    if (names.includes(k) || names.includes(`+${k}`)) return node;
  }
  return null;
}

/** Turns every `[data-explain]` label on the page into a button for its explainer. */
export function wireMetricExplainers(): void {
  for (const node of document.querySelectorAll<HTMLElement>("[data-explain]")) {
    const target = explainerFor(node.dataset.explain!);
    if (!target) continue;
    const button = document.createElement("button");
    button.type = "button";
    button.className = "explain";
    button.textContent = "?";
    button.setAttribute("aria-label", `What is ${node.textContent?.trim() ?? node.dataset.explain}?`);
    button.popoverTargetElement = target;
    node.after(button);
  }
}
