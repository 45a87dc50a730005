/**
 * Runs every `node/lb/testdata/*.txtar` script test (see script/runner.ts for commands).
 * Run one: `deno test -P=unit node/lb/script_test.ts --filter lifecycle`.
 */
import { runScript } from "./script/runner.ts";

const dir = new URL("./testdata/", import.meta.url);
const names = [...Deno.readDirSync(dir)].filter((e) => e.isFile && e.name.endsWith(".txtar")).map((
  e,
) => e.name)
  .sort();

for (const name of names) {
  Deno.test(`script ${name}`, async () => {
    await runScript(await Deno.readTextFile(new URL(name, dir)));
  });
}
