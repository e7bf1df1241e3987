// Asking before the model in the tab is replaced while it has steps no
// checkpoint holds: a modal <dialog>, answered with a button or Escape
// (window.confirm would block the page, and the worker's messages with it).
import { $ } from "./dom";

const dialog = $<HTMLDialogElement>("#confirm");
$("#confirm-cancel").addEventListener("click", () => dialog.close("cancel"));
$("#confirm-ok").addEventListener("click", () => dialog.close("ok"));

/** Shows `text` with a Cancel button and one labelled `action`; true when that one is chosen. */
export function confirmDiscard(text: string, action: string): Promise<boolean> {
  $("#confirm-text").textContent = text;
  $("#confirm-ok").textContent = action;
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true }));
}
