// Served only by `python build.py serve`, never part of dist/: reload the page
// when the server reports a newer build.
let seen = null;
async function poll() {
  try {
    const version = await (await fetch("/__livereload", { cache: "no-store" })).text();
    if (seen !== null && version !== seen) location.reload();
    seen = version;
  } catch {
    // server restarting: keep polling
  }
  setTimeout(poll, 700);
}
poll();
