/**
 * The house rules of docs/architecture.md ("Who imports whom"), checked on every run so they
 * cannot drift: `lib/` imports nothing of ours; `policy-as/` never imports `node/` or `lab/`;
 * `controller/` imports from `node/` only the LB's control plane (`LB_CONTROL_PLANE`: the tables,
 * sources, reconcilers the controller runs to derive the model it publishes), and that control
 * plane imports no other part of `node/`; nothing outside `tests/` imports `tests/`; no product
 * file past 400 lines; C libraries are opened in one place (node/bpf/_ffi.ts).
 */

const ROOT = new URL("../../", import.meta.url);
const PRODUCT = ["lib", "controller", "policy-as", "node", "bpf", "lab", "bench", "scripts", "k8s"];
const MAX_LINES = 400;

async function* sources(dir: string): AsyncGenerator<string> {
  for await (const e of Deno.readDir(new URL(dir, ROOT))) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory && !["build", "node_modules", "vectors"].includes(e.name)) {
      yield* sources(path);
    } else if (e.isFile && /\.(ts|c|h)$/.test(e.name)) yield path;
  }
}

function importsOf(path: string, text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/(?:from|import)\s*\(?\s*"(\.{1,2}\/[^"]+)"/g)) {
    const parts = [...path.split("/").slice(0, -1), ...m[1]!.split("/")];
    const resolved: string[] = [];
    for (const p of parts) {
      if (p === "..") resolved.pop();
      else if (p !== ".") resolved.push(p);
    }
    out.push(resolved.join("/"));
  }
  return out;
}

async function productFiles(): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  for (const dir of PRODUCT) {
    try {
      for await (const path of sources(dir)) {
        files.set(path, await Deno.readTextFile(new URL(path, ROOT)));
      }
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
  }
  files.set("main.ts", await Deno.readTextFile(new URL("main.ts", ROOT)));
  return files;
}

/** The LB's control plane: shared by every LB agent and the controller (which derives the model). */
const LB_CONTROL_PLANE = [
  "node/lb/tables/",
  "node/lb/sources/",
  "node/lb/reconciler/",
  "node/lb/maps/",
  "node/lb/control_plane.ts",
  "node/lb/_testing.ts",
];
const inControlPlane = (path: string) => LB_CONTROL_PLANE.some((p) => path.startsWith(p));

const FORBIDDEN: [prefix: string, may_not_import: string[]][] = [
  ["lib/", ["controller/", "policy-as/", "node/", "lab/", "bench/", "tests/"]],
  ["controller/", ["node/", "lab/", "bench/", "tests/"]],
  ["policy-as/", ["node/", "controller/", "lab/", "bench/", "tests/"]],
  ["node/", ["lab/", "bench/", "tests/"]],
  ["lab/", ["bench/", "tests/"]],
  ["", ["tests/"]],
];

Deno.test("layering: imports run only the documented way (who imports whom)", async () => {
  const wrong: string[] = [];
  for (const [path, text] of await productFiles()) {
    if (path.endsWith("_test.ts")) continue;
    for (const target of importsOf(path, text)) {
      for (const [prefix, banned] of FORBIDDEN) {
        if (!path.startsWith(prefix)) continue;
        const hit = banned.find((b) => target.startsWith(b) && !target.startsWith(prefix));
        const allowed = prefix === "controller/" && hit === "node/" && inControlPlane(target);
        if (hit && !allowed) wrong.push(`${path} imports ${target}`);
      }
      if (inControlPlane(path) && target.startsWith("node/") && !inControlPlane(target)) {
        wrong.push(`${path} (the LB control plane) imports ${target}`);
      }
    }
  }
  if (wrong.length) {
    throw new Error(`imports against the layering:\n${[...new Set(wrong)].join("\n")}`);
  }
});

Deno.test(`layering: no product file past ${MAX_LINES} lines`, async () => {
  const long: string[] = [];
  for (const [path, text] of await productFiles()) {
    if (path.endsWith("_test.ts")) continue;
    const lines = text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
    if (lines > MAX_LINES) long.push(`${path}: ${lines} lines`);
  }
  if (long.length) throw new Error(`split these along their jobs:\n${long.join("\n")}`);
});

Deno.test("layering: C libraries are opened only in node/bpf/_ffi.ts (one symbols table each)", async () => {
  const files = await productFiles();
  for await (const path of sources("tests")) {
    files.set(path, await Deno.readTextFile(new URL(path, ROOT)));
  }
  const opens = [...files].filter(([path, text]) =>
    path !== "node/bpf/_ffi.ts" && /Deno\.dlopen\(/.test(text)
  ).map(([path]) => path);
  if (opens.length) {
    throw new Error(`add the symbols to node/bpf/_ffi.ts instead of opening:\n${opens.join("\n")}`);
  }
});
