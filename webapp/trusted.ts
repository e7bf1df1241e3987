// The one Trusted Types policy. The site's CSP (tinygpt/site_build/headers.py)
// requires Trusted Types for script sinks and allows only this policy's name.
// The app has one such sink, in the page and in the worker alike: the script
// a Worker starts from, which must be one of the site's own bundles.
import facts from "../tinygpt/facts.json";

interface ScriptUrlPolicy {
  createScriptURL(url: string): unknown;
}
interface TrustedTypes {
  createPolicy(name: string, rules: { createScriptURL(url: string): string }): ScriptUrlPolicy;
}

let policy: ScriptUrlPolicy | undefined;

function sameOriginAsset(url: string): string {
  const u = new URL(url, location.href);
  if (u.origin !== location.origin || !u.pathname.startsWith("/assets/")) {
    throw new TypeError(`refused to start a worker from ${url}: only this site's scripts under /assets/ may run`);
  }
  return u.href;
}

/**
 * `url` as the Worker constructor takes it under the CSP: a TrustedScriptURL
 * where the browser has Trusted Types (typed as a string: TypeScript's DOM
 * types lack them), checked the same way where it has not.
 */
export function workerUrl(url: string | URL): string {
  const tt = (globalThis as { trustedTypes?: TrustedTypes }).trustedTypes;
  if (!tt) return sameOriginAsset(String(url));
  // Created on first use, once per page or worker: a second policy of the same name is refused.
  policy ??= tt.createPolicy(facts.app.trusted_types_policy, { createScriptURL: sameOriginAsset });
  return policy.createScriptURL(String(url)) as string;
}
