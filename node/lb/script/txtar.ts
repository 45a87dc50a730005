/**
 * txtar archives (as in Go's x/tools/txtar): a comment section, then files introduced by
 * `-- name --` lines. Script tests keep their commands in the comment and inputs/expectations
 * in the files.
 *
 * @module
 */

/** A parsed archive. */
export interface Txtar {
  readonly comment: string;
  readonly files: ReadonlyMap<string, string>;
}

const MARKER = /^-- (.+) --$/;

/** Parses txtar text. Duplicate file names are an error. */
export function parseTxtar(text: string): Txtar {
  const lines = text.split("\n");
  const comment: string[] = [];
  const files = new Map<string, string>();
  let name: string | null = null;
  let body: string[] = [];
  const flush = () => {
    if (name === null) return;
    if (files.has(name)) throw new Error(`Invalid txtar: file "${name}" appears twice`);
    files.set(name, body.join("\n") + (body.length > 0 ? "\n" : ""));
  };
  for (const line of lines) {
    const m = MARKER.exec(line.trimEnd());
    if (m !== null) {
      flush();
      name = m[1]!.trim();
      body = [];
    } else if (name === null) comment.push(line);
    else body.push(line);
  }
  if (name !== null) {
    // Drop the final newline-split artifact.
    if (body.length > 0 && body[body.length - 1] === "") body.pop();
    flush();
  }
  return { comment: comment.join("\n"), files };
}
