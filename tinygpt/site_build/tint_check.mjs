// Compile WGSL with Tint (Dawn through npm `webgpu`), for shaders naga cannot
// read. stdin: {"shaders/x.wgsl": source, ...}; the file named by --out PATH: {"adapter": description, "results":
// {"shaders/x.wgsl": null | {"message", "where": "line:col"} | {"lacks": feature}}}: "lacks" where
// the module enables an extension whose feature this adapter does not offer (SwiftShader has no
// shader-f16), which Tint would refuse for the adapter, not for the code. Exits 2 when there is
// no adapter. --dawn-f16-toggle: Dawn's vulkan_enable_f16_on_nvidia, without which Dawn hides
// shader-f16 on NVIDIA (the record run on a test host, shaders.py --record; never the app).
// Not stdout: Dawn prints a module's compilation warnings there.
import { writeFileSync } from "node:fs";
import { create, globals } from "webgpu";

Object.assign(globalThis, globals);
let input = "";
for await (const chunk of process.stdin) input += chunk;
const files = JSON.parse(input);

const toggles = ["allow_unsafe_apis", ...(process.argv.includes("--dawn-f16-toggle") ? ["vulkan_enable_f16_on_nvidia"] : [])];
const gpu = create([`enable-dawn-features=${toggles.join(",")}`]);
const adapter = await gpu.requestAdapter();
if (!adapter) {
  console.error("no WebGPU adapter in Dawn (set VK_ICD_FILENAMES to a Vulkan driver such as SwiftShader's)");
  process.exit(2);
}
const device = await adapter.requestDevice({ requiredFeatures: [...adapter.features] });
// The feature an `enable` needs: f16's is shader-f16, the others' their own name with dashes.
const featureOf = (extension) => (extension === "f16" ? "shader-f16" : extension.replaceAll("_", "-"));
const results = {};
for (const [name, code] of Object.entries(files)) {
  const enabled = [...code.matchAll(/^\s*enable\s+([^;]+);/gm)].flatMap((m) => m[1].split(",").map((e) => e.trim()));
  const lacks = enabled.map(featureOf).find((f) => !device.features.has(f));
  if (lacks) {
    results[name] = { lacks };
    continue;
  }
  device.pushErrorScope("validation");
  const module = device.createShaderModule({ code });
  const info = await module.getCompilationInfo();
  await device.popErrorScope();
  const error = info.messages.find((m) => m.type === "error");
  results[name] = error ? { message: error.message, where: `${error.lineNum}:${error.linePos}` } : null;
}
const { vendor, architecture, device: name, description } = adapter.info;
const out = process.argv[process.argv.indexOf("--out") + 1];
writeFileSync(out, JSON.stringify({ adapter: [vendor, architecture, name, description].filter(Boolean).join(" · "), results }));
device.destroy();
process.exit(0);
