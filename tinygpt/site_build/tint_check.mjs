// Compile WGSL with Tint (Dawn through npm `webgpu`), for shaders naga cannot
// read. stdin: {"shaders/x.wgsl": source, ...}; stdout: {"shaders/x.wgsl":
// null | {"message", "where": "line:col"} | {"lacks": feature}}: "lacks" where the module enables
// an extension whose feature this adapter does not offer (SwiftShader has no shader-f16), which
// Tint would refuse for the adapter, not for the code. Exits non-zero when there is no adapter.
import { create, globals } from "webgpu";

Object.assign(globalThis, globals);
let input = "";
for await (const chunk of process.stdin) input += chunk;
const files = JSON.parse(input);

const gpu = create(["enable-dawn-features=allow_unsafe_apis"]);
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
process.stdout.write(JSON.stringify(results));
device.destroy();
process.exit(0);
