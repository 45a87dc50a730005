/**
 * Reads Kubernetes manifests (YAML, multi-document, or JSON; a `kind: List` is unpacked) from a
 * file or, recursively, a directory, in path order.
 *
 * @module
 */
import { parseAllDocuments } from "yaml";
import type { Obj } from "./resources.ts";

async function files(path: string): Promise<string[]> {
  const info = await Deno.stat(path);
  if (info.isFile) return [path];
  const out: string[] = [];
  for await (const e of Deno.readDir(path)) {
    const p = `${path.replace(/\/$/, "")}/${e.name}`;
    if (e.isDirectory) out.push(...await files(p));
    else if (/\.(ya?ml|json)$/.test(e.name)) out.push(p);
  }
  return out.sort();
}

/** Every object in the manifests at `path` (file or directory). */
export async function loadManifests(path: string): Promise<Obj[]> {
  const out: Obj[] = [];
  for (const file of await files(path)) {
    const text = await Deno.readTextFile(file);
    for (const doc of parseAllDocuments(text)) {
      if (doc.errors.length > 0) {
        throw new Error(`Cannot read manifest "${file}": ${doc.errors[0]!.message}`);
      }
      const value = doc.toJS() as Obj | null;
      if (value === null || value === undefined) continue;
      if (value.kind === "List" && Array.isArray(value.items)) out.push(...value.items as Obj[]);
      else out.push(value);
    }
  }
  return out;
}
