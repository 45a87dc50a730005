/**
 * Writes the golden of every format version that has none (`testdata/formats/<name>.v<N>.golden`)
 * from its encoder's sample (`_formats.ts`), and refuses to overwrite an existing one: a version's
 * bytes are fixed once written. Changed an encoder? Bump its version constant (and CHANGELOG.md),
 * then run this.
 *
 *     ./hf deno run -P=netns --allow-write=tests/hygiene/testdata/formats tests/hygiene/formats_update.ts
 *
 * @module
 */
import { type Format, FORMATS, GOLDEN_DIR, goldenPath } from "./_formats.ts";

/** Writes the missing goldens of `formats` into `dir`; returns the paths written and kept. */
export async function writeMissingGoldens(
  formats: readonly Format[] = FORMATS,
  dir = GOLDEN_DIR,
): Promise<{ written: string[]; kept: string[] }> {
  const written: string[] = [], kept: string[] = [];
  for (const f of formats) {
    const path = goldenPath(f.name, f.version, dir);
    try {
      await Deno.writeTextFile(path, f.sample(), { createNew: true });
      written.push(path);
    } catch (err) {
      if (!(err instanceof Deno.errors.AlreadyExists)) throw err;
      kept.push(path);
    }
  }
  return { written, kept };
}

if (import.meta.main) {
  const { written, kept } = await writeMissingGoldens();
  for (const p of written) {
    console.log(JSON.stringify({ level: "info", msg: "golden written", path: p }));
  }
  for (const p of kept) {
    console.log(JSON.stringify({
      level: "info",
      msg: "golden exists, not overwritten (a changed format needs a new version)",
      path: p,
    }));
  }
}
