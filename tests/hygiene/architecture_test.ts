/**
 * docs/architecture.md and the folder READMEs, checked against the code so they cannot drift:
 *
 * - every BPF map the C declares (`} name SEC(".maps")` in bpf/*.c, bpf/*.h) is a row of
 *   docs/architecture.md's "BPF maps" table, and every map that table names is declared;
 * - every program and concept folder ({@linkcode FOLDERS}) has a README.md, and a mod.ts with a
 *   module doc where the folder has one public surface; every folder holding TypeScript under
 *   node/ and controller/ is one of them (a new folder gets a README);
 * - every path a folder README names exists (from the repository root or from the folder), and
 *   so does every path with a `/` that docs/architecture.md names;
 * - a README's "**Imports**" and "**Imported by**" name exactly what the code imports and who
 *   imports it (product files; tests aside): each import is covered by a named path, and each
 *   named path covers one;
 * - "Who imports whom" has a rule for each top-level part.
 */

import { deepStrictEqual as assertEquals } from "node:assert/strict";

const ROOT = new URL("../../", import.meta.url);

/** Program and concept folders: [folder, its public surface (mod.ts) or null: none by design]. */
const FOLDERS: readonly [string, string | null][] = [
  ["node/lb", "node/lb/mod.ts"],
  ["node/lb/tables", "node/lb/tables/mod.ts"],
  ["node/lb/sources", "node/lb/sources/mod.ts"],
  ["node/lb/reconciler", "node/lb/reconciler/mod.ts"],
  ["node/lb/maps", "node/lb/maps/mod.ts"],
  ["node/lb/flows", "node/lb/flows/mod.ts"],
  ["node/lb/health", "node/lb/health/mod.ts"],
  ["node/egress", "node/egress/mod.ts"],
  ["node/egress_steer", "node/egress_steer/mod.ts"],
  ["node/anycast", "node/anycast/mod.ts"],
  ["node/backends", "node/backends/mod.ts"],
  ["node/bgp", "node/bgp/mod.ts"],
  ["node/bpf", "node/bpf/mod.ts"],
  ["node/conntrack", "node/conntrack/mod.ts"],
  ["controller", null], // only subfolders
  ["controller/k8s", "controller/k8s/mod.ts"],
  ["controller/ipam", "controller/ipam/mod.ts"],
  ["controller/model", "controller/model/mod.ts"],
  ["controller/status", "controller/status/mod.ts"],
  ["controller/egress", "controller/egress/mod.ts"],
  ["lib", null], // each file is its own surface
  ["lib/statedb", "lib/statedb/mod.ts"],
  ["policy-as", "policy-as/host/mod.ts"],
  ["lab", "lab/mod.ts"],
  ["lab/kube", "lab/kube/mod.ts"],
  ["lab/kubelet", null], // entry kubelet.ts
  ["bench", null], // one file per task
  ["bpf", null], // C
];
const FOLDER_NAMES = new Set(FOLDERS.map(([f]) => f));
/** Folders holding code that need no README: test data, script tests, programs run in namespaces. */
const NO_README = new Set(["node/lb/script", "node/lb/testdata", "controller/status/assets"]);

const text = (path: string) => Deno.readTextFileSync(new URL(path, ROOT));
const exists = (path: string) => {
  try {
    Deno.statSync(new URL(path, ROOT));
    return true;
  } catch {
    return false;
  }
};

function* walk(dir: string): Generator<string> {
  for (
    const e of [...Deno.readDirSync(new URL(dir, ROOT))].sort((a, b) => a.name < b.name ? -1 : 1)
  ) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory && !["build", "node_modules", "vectors"].includes(e.name)) yield* walk(path);
    else if (e.isFile) yield path;
  }
}

/** The section of `doc` under `heading` (up to the next heading of the same or a higher level). */
function section(doc: string, heading: string): string {
  const level = heading.match(/^#+/)![0].length;
  const lines = doc.split("\n");
  const start = lines.findIndex((l) => l.trim() === heading);
  if (start < 0) throw new Error(`docs/architecture.md has no "${heading}"`);
  const end = lines.findIndex((l, i) =>
    i > start && /^#+ /.test(l) && l.match(/^#+/)![0].length <= level
  );
  return lines.slice(start + 1, end < 0 ? undefined : end).join("\n");
}

Deno.test("architecture: every BPF map in the C is in the map table, and only those", () => {
  const declared = new Set<string>();
  for (const path of walk("bpf")) {
    if (!/\.(c|h)$/.test(path)) continue;
    for (const m of text(path).matchAll(/\}\s*(\w+)\s+SEC\("\.maps"\)/g)) declared.add(m[1]!);
  }
  const table = section(text("docs/architecture.md"), "### BPF maps");
  const listed = new Set<string>();
  for (const line of table.split("\n")) {
    if (!line.startsWith("| `")) continue;
    const first = line.split("|")[1]!;
    for (const m of first.matchAll(/`(hf_\w+)`/g)) listed.add(m[1]!);
  }
  const missing = [...declared].filter((m) => !listed.has(m)).sort();
  const stale = [...listed].filter((m) => !declared.has(m)).sort();
  assertEquals(
    { missing, stale },
    { missing: [], stale: [] },
    'docs/architecture.md "BPF maps": add the missing maps\' rows, remove the stale ones',
  );
  if (declared.size < 20) {
    throw new Error(`only ${declared.size} maps found in bpf/: parser broken?`);
  }
});

Deno.test("architecture: every program and concept folder has a README.md, and its mod.ts", () => {
  const wrong: string[] = [];
  for (const [folder, surface] of FOLDERS) {
    if (!exists(`${folder}/README.md`)) wrong.push(`${folder}/README.md is missing`);
    if (surface === null) continue;
    if (!exists(surface)) wrong.push(`${surface} is missing`);
    else if (!/^\/\*\*[\s\S]*?@module[\s\S]*?\*\//.test(text(surface))) {
      wrong.push(`${surface} has no module doc (/** … @module */ first)`);
    }
  }
  for (const top of ["node", "controller"]) {
    for (const path of walk(top)) {
      const dir = path.slice(0, path.lastIndexOf("/"));
      if (!path.endsWith(".ts") || FOLDER_NAMES.has(dir) || NO_README.has(dir)) continue;
      wrong.push(`${dir}/ holds code but is not in FOLDERS (give it a README.md): ${path}`);
    }
  }
  assertEquals([...new Set(wrong)], []);
});

/** Backticked path-like words of `doc` (the first word of each span). */
function pathsIn(doc: string): string[] {
  const out: string[] = [];
  for (const m of doc.matchAll(/`([^`\n]+)`/g)) {
    const word = m[1]!.trim().split(/\s+/)[0]!;
    if (/[*{}<>:…|"$@]/.test(word) || /^[-/]/.test(word)) continue;
    if (word.includes("/") || /\.(ts|md|c|h|yaml|json|txt|sh|txtar)$/.test(word)) out.push(word);
  }
  return out;
}

Deno.test("architecture: every path the folder READMEs and architecture.md name exists", () => {
  const wrong: string[] = [];
  for (const [folder] of FOLDERS) {
    const readme = `${folder}/README.md`;
    if (!exists(readme)) continue;
    for (const p of pathsIn(text(readme))) {
      if (!exists(p) && !exists(`${folder}/${p}`)) wrong.push(`${readme}: \`${p}\``);
    }
  }
  for (const p of pathsIn(text("docs/architecture.md"))) {
    if (p.includes("/") && !exists(p)) {
      wrong.push(`docs/architecture.md: \`${p}\``);
    }
  }
  assertEquals([...new Set(wrong)], []);
});

/** `import … "./x"` targets of a source file, resolved from the root (as layering_test.ts reads them). */
function importsOf(path: string, source: string): string[] {
  const out: string[] = [];
  for (const m of source.matchAll(/(?:from|import)\s*\(?\s*"(\.{1,2}\/[^"]+)"/g)) {
    const resolved: string[] = [];
    for (const p of [...path.split("/").slice(0, -1), ...m[1]!.split("/")]) {
      if (p === "..") resolved.pop();
      else if (p !== ".") resolved.push(p);
    }
    out.push(resolved.join("/"));
  }
  return out;
}

const PRODUCT = ["lib", "controller", "policy-as", "node", "lab", "bench", "scripts"];
const isProduct = (path: string) =>
  path.endsWith(".ts") && !path.endsWith("_test.ts") && !path.startsWith("tests/");

/** The folder a file belongs to for the READMEs: the deepest README'd folder holding it. */
function ownerOf(path: string): string | undefined {
  let best: string | undefined;
  for (const f of FOLDER_NAMES) {
    if (path.startsWith(f + "/") && (best === undefined || f.length > best.length)) best = f;
  }
  return best;
}

/** Paths named in a README paragraph starting `**label**:` (up to the next bold label or bullet). */
function named(markdown: string, label: string): string[] {
  const readme = markdown.replace(/\s+/g, " ");
  const at = readme.indexOf(`**${label}**:`);
  if (at < 0) return [];
  const rest = readme.slice(at + label.length + 5);
  const end = rest.search(/\*\*[A-Z][a-z ]+\*\*:| - \*\*/);
  const part = end < 0 ? rest : rest.slice(0, end);
  const out: string[] = [];
  for (const m of part.matchAll(/`([^`\n]+)`/g)) {
    const word = m[1]!.trim();
    const brace = word.match(/^(.*)\{([^}]+)\}(.*)$/);
    const words = brace ? brace[2]!.split(",").map((b) => brace[1] + b + brace[3]) : [word];
    for (const w of words) if (w.includes("/") || w === "main.ts") out.push(w.replace(/\/$/, ""));
  }
  return out;
}

const covers = (token: string, file: string) => file === token || file.startsWith(token + "/");

Deno.test("architecture: each README's Imports and Imported by match the code", () => {
  const sources = new Map<string, string>([["main.ts", text("main.ts")]]);
  for (const top of PRODUCT) {
    for (const path of walk(top)) if (isProduct(path)) sources.set(path, text(path));
  }
  const edges: [from: string, to: string][] = [];
  for (const [path, source] of sources) {
    for (const target of importsOf(path, source)) edges.push([path, target]);
  }
  const wrong: string[] = [];
  for (const [folder] of FOLDERS) {
    if (!exists(`${folder}/README.md`)) continue;
    const readme = text(`${folder}/README.md`);
    // A folder whose code is all in subfolders (controller/) speaks for its whole tree.
    const direct = [...sources.keys()].some((p) => ownerOf(p) === folder);
    const mine = (p: string) => direct ? ownerOf(p) === folder : p.startsWith(folder + "/");
    const inTree = (p: string) => p.startsWith(folder + "/");
    const check = (label: string, actual: Set<string>, skip: boolean) => {
      const tokens = named(readme, label);
      if (!skip) {
        for (const a of actual) {
          if (!tokens.some((t) => covers(t, a))) {
            wrong.push(`${folder}/README.md ${label}: add ${a}`);
          }
        }
      }
      for (const t of tokens) {
        if (![...actual].some((a) => covers(t, a))) {
          wrong.push(`${folder}/README.md ${label}: no \`${t}\``);
        }
      }
    };
    check(
      "Imports",
      new Set(edges.filter(([f, t]) => mine(f) && !inTree(t)).map(([, t]) => t)),
      /any product folder/.test(readme),
    );
    check(
      "Imported by",
      new Set(edges.filter(([f, t]) => mine(t) && !inTree(f)).map(([f]) => f)),
      /\*\*Imported by\*\*: everything/.test(readme),
    );
  }
  assertEquals(wrong, []);
});

Deno.test('architecture: "Who imports whom" has a rule for every top-level part', () => {
  const rules = section(text("docs/architecture.md"), "## Who imports whom");
  const missing = [
    "lib/",
    "policy-as/",
    "controller/",
    "node/",
    "lab/",
    "bench/",
    "tests/",
    "main.ts",
  ]
    .filter((part) => !rules.includes(`- \`${part}\` —`));
  assertEquals(missing, []);
});
