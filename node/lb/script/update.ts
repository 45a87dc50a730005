/**
 * Developer tool: re-records the expected outputs of script tests from what they produce.
 * Review the diff before committing! `deno run -A node/lb/script/update.ts [FILE.txtar...]`
 *
 * @module
 */
import { readCommandLine } from "../../../lib/args.ts";
import { runScript } from "./runner.ts";
import { parseTxtar } from "./txtar.ts";

const SPEC = {
  command: "update.ts",
  usage: `usage: deno run -A node/lb/script/update.ts [FILE.txtar...]
  Re-records the expected outputs of the given script tests (default: all in node/lb/testdata).`,
  positionals: true,
  options: {},
} as const;

/** Re-records the given archives (default: all in node/lb/testdata). */
export async function main(args: string[]): Promise<number> {
  const read = readCommandLine(args, SPEC, ({ positionals }) => positionals);
  if ("exit" in read) return read.exit;
  const dir = new URL("../testdata/", import.meta.url);
  const files = read.options.length > 0
    ? read.options
    : [...Deno.readDirSync(dir)].filter((e) => e.name.endsWith(".txtar")).map((e) =>
      new URL(e.name, dir).pathname
    );
  for (const path of files) {
    const text = await Deno.readTextFile(path);
    const updates = new Map<string, string>();
    try {
      await runScript(text, { update: (f, actual) => updates.set(f, actual) });
    } catch (e) {
      console.error(`${path}: ${(e as Error).message}`);
    }
    if (updates.size === 0) continue;
    const ar = parseTxtar(text);
    let out = ar.comment.replace(/\n*$/, "\n");
    for (const [name, body] of ar.files) {
      const b = updates.get(name) ?? body;
      out += `-- ${name} --\n${b.endsWith("\n") || b === "" ? b : b + "\n"}`;
    }
    await Deno.writeTextFile(path, out);
    console.log(`${path}: updated ${[...updates.keys()].join(", ")}`);
  }
  return 0;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
