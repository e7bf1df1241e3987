// Failures in words a user can act on. The browser's own errors (DOMException
// and friends) carry messages written for developers ("The requested file could
// not be read, typically due to permission problems that have occurred after a
// reference to a file was acquired."); the page shows these sentences instead.
// Our own errors (CheckpointError, StorageFullError, ...) are written for users
// already and pass through; an error of an unknown kind keeps its message.

const BY_NAME: Record<string, string> = {
  NotReadableError: "the file changed or was removed after it was chosen; choose it again",
  NotFoundError: "the file is no longer where it was (moved or deleted)",
  QuotaExceededError: "the browser's storage for this site is full",
  SecurityError: "the browser does not allow it on this page (a private window or a site setting may block it)",
  NotAllowedError: "the browser did not allow it",
  AbortError: "it was cancelled",
};

export function plainWords(e: unknown): string {
  if (!(e instanceof Error) && !(e instanceof DOMException)) return String(e);
  if (BY_NAME[e.name]) return BY_NAME[e.name];
  // Allocation failures: "Array buffer allocation failed", "WebAssembly.Memory(): could not allocate memory".
  if (e instanceof RangeError && /allocat/i.test(e.message)) return "there is not enough memory for it on this device";
  return e.message;
}
