/**
 * Builds the policy WASM modules with the AssemblyScript compiler from npm:
 * `policy-as/build/debug.wasm` and `policy-as/build/release.wasm` (-O3), plus `.wat` text.
 * Called by `deno task build` (scripts/build.ts); runs alone with
 * `deno run -P=build policy-as/build.ts`.
 *
 * @module
 */
import asc from "assemblyscript/asc";

const POLICY_DIR = new URL(".", import.meta.url);

/** The asconfig.json targets that `build()` compiles, in order. */
export const TARGETS = ["debug", "release"] as const;

/**
 * Compiles every target in `policy-as/asconfig.json`.
 *
 * @throws {Error} naming the target and the compiler's diagnostics when compilation fails.
 */
export async function build(): Promise<void> {
  const dir = POLICY_DIR.pathname;
  await Deno.mkdir(new URL("build/", POLICY_DIR), { recursive: true });
  for (const target of TARGETS) {
    const started = performance.now();
    let stderr = "";
    const { error } = await asc.main(
      ["assembly/index.ts", "--config", "asconfig.json", "--target", target, "--baseDir", dir],
      {
        stdout: { write: (s: string | Uint8Array) => void s },
        stderr: {
          write: (s: string | Uint8Array) => {
            stderr += typeof s === "string" ? s : new TextDecoder().decode(s);
          },
        },
      },
    );
    if (error) {
      throw new Error(
        `Cannot build policy WASM target "${target}": ${error.message}\n${stderr.trim()}`,
      );
    }
    const out = new URL(`build/${target}.wasm`, POLICY_DIR);
    const size = (await Deno.stat(out)).size;
    console.log(JSON.stringify({
      level: "info",
      msg: "policy wasm built",
      target,
      path: out.pathname,
      bytes: size,
      ms: Math.round(performance.now() - started),
    }));
  }
}

if (import.meta.main) {
  await build();
}
