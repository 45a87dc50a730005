/**
 * `deno task build`: builds every artefact tests and the demo load — BPF objects (bpf/build.ts)
 * and WASM policy modules (policy-as/build.ts). Each part exports `build(): Promise<void>`. First
 * writes `build_info.json`, the git commit `main.ts --version` and `holdfast_build_info` show
 * (lib/version.ts).
 *
 * @module
 */
import { readCommandLineOrExit } from "../lib/args.ts";
import { writeBuildInfo } from "./_build_info.ts";

readCommandLineOrExit(Deno.args, {
  command: "build",
  usage: `usage: ./hf build   (deno task build)
  Builds the BPF objects (bpf/build/) and the WASM policy modules (policy-as/build/).`,
  options: {},
}, () => {});

await writeBuildInfo();

const parts = ["../bpf/build.ts", "../policy-as/build.ts"];

for (const part of parts) {
  const url = new URL(part, import.meta.url);
  try {
    await Deno.stat(url);
  } catch {
    continue; // part not written yet
  }
  const started = performance.now();
  const mod = await import(url.href) as { build(): Promise<void> };
  await mod.build();
  console.log(JSON.stringify({
    level: "info",
    msg: "built",
    part: part.replace("../", ""),
    ms: Math.round(performance.now() - started),
  }));
}
