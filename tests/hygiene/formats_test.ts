/**
 * Every cross-process format encodes its fixed sample exactly as the golden of its version
 * (`_formats.ts`, docs/contracts.md "Format versions"): an encoder whose output changes without
 * its version constant changing fails here, naming the format. The goldens are written once per
 * version by `formats_update.ts`, which never overwrites one.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import { checkFormats, type Format, FORMATS, goldenPath } from "./_formats.ts";
import { writeMissingGoldens } from "./formats_update.ts";
import { encodeFlowValue } from "../../node/lb/flows/schema.ts";

const ROOT = new URL("../../", import.meta.url);

Deno.test("formats: every encoder's sample equals its version's golden", async () => {
  deepStrictEqual(await checkFormats(FORMATS), []);
});

Deno.test("formats: names are unique, each home holds its version constant", async () => {
  deepStrictEqual(new Set(FORMATS.map((f) => f.name)).size, FORMATS.length);
  for (const f of FORMATS) {
    const text = await Deno.readTextFile(new URL(f.home, ROOT));
    ok(/export const [A-Z_]*VERSION = \d+;/.test(text), `${f.home} has no version constant`);
  }
});

Deno.test("formats: every golden file belongs to a format at or below its version", async () => {
  const dir = new URL("tests/hygiene/testdata/formats/", ROOT);
  for await (const e of Deno.readDir(dir)) {
    const m = /^(.+)\.v(\d+)\.golden$/.exec(e.name);
    ok(m, `${e.name}: not <format>.v<N>.golden`);
    const f = FORMATS.find((f) => f.name === m[1]);
    ok(f, `${e.name}: no format "${m[1]}" in tests/hygiene/_formats.ts`);
    ok(Number(m[2]) <= f.version, `${e.name}: newer than ${f.name}'s version ${f.version}`);
  }
});

Deno.test("formats: a changed encoder at the same version is named (not vacuous)", async () => {
  const flows = FORMATS.find((f) => f.name === "flow-records")!;
  // The fixture: flow values written with the epoch again (the v1 form) but still called v2.
  const changed: Format = {
    ...flows,
    sample: () =>
      flows.sample().replace(
        encodeFlowValue(0x0a010003, 1700000000000),
        "0a010003:0:1700000000000",
      ),
  };
  ok(changed.sample() !== flows.sample(), "the fixture must change the sample");
  const problems = await checkFormats([...FORMATS.filter((f) => f !== flows), changed]);
  deepStrictEqual(problems.length, 1, problems.join("\n"));
  ok(problems[0]!.includes('format "flow-records"'), problems[0]);
  ok(problems[0]!.includes("v2 golden"), problems[0]);
  // Every format's sample is checked, not only the first: change the last one's too.
  const last = FORMATS.at(-1)!;
  const both = await checkFormats([
    ...FORMATS.filter((f) => f !== flows && f !== last),
    changed,
    { ...last, sample: () => last.sample() + "extra: 1\n" },
  ]);
  deepStrictEqual(both.map((p) => /format "([^"]+)"/.exec(p)?.[1]), ["flow-records", last.name]);
});

Deno.test("formats: a version without a golden is named; the updater never overwrites", async () => {
  const heartbeat = FORMATS.find((f) => f.name === "egress-heartbeat")!;
  const bumped: Format = { ...heartbeat, version: heartbeat.version + 1000 };
  const problems = await checkFormats([bumped]);
  deepStrictEqual(problems.length, 1);
  ok(problems[0]!.includes('format "egress-heartbeat" v1001'), problems[0]);
  ok(problems[0]!.includes("has no golden"), problems[0]);
  // The updater writes a missing version's golden and keeps an existing one as it is, even when
  // the encoder now says otherwise (in a scratch directory: the repository's stay untouched).
  const dir = await Deno.makeTempDir({ prefix: "hf-formats-" });
  try {
    const kept = goldenPath(heartbeat.name, heartbeat.version, dir);
    await Deno.writeTextFile(kept, "heartbeat: written by an earlier encoder\n");
    const r = await writeMissingGoldens([heartbeat, bumped], dir);
    deepStrictEqual(r, { written: [goldenPath(bumped.name, bumped.version, dir)], kept: [kept] });
    deepStrictEqual(await Deno.readTextFile(kept), "heartbeat: written by an earlier encoder\n");
    deepStrictEqual(await Deno.readTextFile(r.written[0]!), bumped.sample());
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
