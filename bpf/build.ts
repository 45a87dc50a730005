/**
 * Builds every BPF C source in `bpf/` into `bpf/build/<name>.o` with Debian clang
 * (`-O2 -g -target bpf`). Called by `scripts/build.ts` (`deno task build`).
 *
 * @module
 */

const BPF_DIR = new URL(".", import.meta.url);
const OUT_DIR = new URL("./build/", import.meta.url);

/** Compiler flags; `-g` keeps BTF, which libbpf needs for the map definitions. */
const CFLAGS = [
  "-O2",
  "-g",
  "-target",
  "bpf",
  "-Wall",
  "-Werror",
  "-I/usr/include/x86_64-linux-gnu",
];

/** Sources built a second time with extra flags, as `[object, flags]`. */
const VARIANTS: Readonly<Record<string, ReadonlyArray<readonly [string, readonly string[]]>>> = {
  "migrate_probe.c": [["migrate_probe_v2.o", ["-DHF_PROBE_V2"]]],
  // The node programs for kernels without bpf_cast_to_kern_ctx (before 6.3): checksums by helpers.
  "node_tc.c": [["node_tc_compat.o", ["-DHF_NODE_NO_KFUNC"]]],
};

/** Compiles all `bpf/*.c` into `bpf/build/`; throws with clang's output on the first failure. */
export async function build(): Promise<void> {
  await Deno.mkdir(OUT_DIR, { recursive: true });
  const sources: string[] = [];
  for await (const entry of Deno.readDir(BPF_DIR)) {
    if (entry.isFile && entry.name.endsWith(".c")) sources.push(entry.name);
  }
  sources.sort();
  const jobs = sources.flatMap((name) => [
    [name, name.replace(/\.c$/, ".o"), []] as const,
    ...(VARIANTS[name] ?? []).map(([o, flags]) => [name, o, flags] as const),
  ]);
  await Promise.all(jobs.map(async ([name, object, flags]) => {
    const src = new URL(name, BPF_DIR).pathname;
    const out = new URL(object, OUT_DIR).pathname;
    const started = performance.now();
    const result = await new Deno.Command("clang", {
      args: [...CFLAGS, ...flags, "-c", src, "-o", out],
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!result.success) {
      const text = new TextDecoder().decode(result.stderr);
      throw new Error(
        `Cannot compile BPF source "bpf/${name}": clang exited ${result.code}\n${text}`,
      );
    }
    console.log(JSON.stringify({
      level: "info",
      msg: "bpf: compiled",
      source: `bpf/${name}`,
      object: `bpf/build/${object}`,
      ms: Math.round(performance.now() - started),
    }));
  }));
}

if (import.meta.main) await build();
