/**
 * Builds the policy WASM modules with the AssemblyScript compiler from npm:
 * `policy-as/build/debug.wasm` and `policy-as/build/release.wasm` (-O3), plus `.wat` text, and
 * the broken test fixtures of `policy-as/assembly/fixtures/` into `policy-as/build/fixtures/`.
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
 * Variants of the module → `build/fixtures/<name>.wasm`: broken ones the validation must reject
 * (wrong_hash, wrong_hash6, slow_build, trap_build, always_active, ignore_weights) and valid
 * alternatives a swap may install (strict_health: twice the rise; rotated_fill: another table
 * fill).
 */
export const FIXTURES = [
  "wrong_hash",
  "wrong_hash6",
  "slow_build",
  "trap_build",
  "always_active",
  "ignore_weights",
  "strict_health",
  "rotated_fill",
] as const;

async function compile(args: string[], what: string): Promise<void> {
  let stderr = "";
  const { error } = await asc.main(args, {
    stdout: { write: (s: string | Uint8Array) => void s },
    stderr: {
      write: (s: string | Uint8Array) => {
        stderr += typeof s === "string" ? s : new TextDecoder().decode(s);
      },
    },
  });
  if (error) {
    throw new Error(`Cannot build policy WASM ${what}: ${error.message}\n${stderr.trim()}`);
  }
}

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
    await compile(
      ["assembly/index.ts", "--config", "asconfig.json", "--target", target, "--baseDir", dir],
      `target "${target}"`,
    );
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
  await Deno.mkdir(new URL("build/fixtures/", POLICY_DIR), { recursive: true });
  for (const name of FIXTURES) {
    await compile([
      `assembly/fixtures/${name}.ts`,
      "--config",
      "asconfig.json",
      "--target",
      "release",
      "--baseDir",
      dir,
      "--outFile",
      `build/fixtures/${name}.wasm`,
      "--textFile",
      `build/fixtures/${name}.wat`,
    ], `fixture "${name}"`);
  }
}

if (import.meta.main) {
  await build();
}
