/**
 * Kubernetes label selectors (`metav1.LabelSelector`): `matchLabels` plus `matchExpressions`
 * with the operators `In`, `NotIn`, `Exists` and `DoesNotExist`, all requirements ANDed — the
 * semantics of `metav1.LabelSelectorAsSelector`:
 * - `{}` (no requirements) selects everything;
 * - `NotIn` and `DoesNotExist` select objects that lack the key;
 * - `In`/`NotIn` need at least one value, `Exists`/`DoesNotExist` take none (the API server
 *   rejects such selectors; so does {@linkcode compileLabelSelector}).
 *
 * An absent selector (`undefined`/`null`) is not a selector at all: Kubernetes' helper reads it
 * as "nothing", while many fields define absence as "everything" (Holdfast's
 * `AddressPool.spec.serviceSelector`). Callers decide; see {@linkcode compileLabelSelector}.
 *
 * @example
 * ```ts
 * import { compileLabelSelector } from "./label_selector.ts";
 * const blue = compileLabelSelector({
 *   matchLabels: { team: "blue" },
 *   matchExpressions: [{ key: "tier", operator: "NotIn", values: ["test"] }],
 * });
 * if (!blue({ team: "blue" }) || blue({ team: "blue", tier: "test" })) throw new Error("selector");
 * ```
 *
 * @module
 */

/** One `matchExpressions` entry (`metav1.LabelSelectorRequirement`). */
export interface LabelSelectorRequirement {
  key: string;
  operator: string;
  values?: string[];
}

/** `metav1.LabelSelector`, structurally (so `@kubernetes/client-node`'s V1LabelSelector fits). */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

/** A compiled selector: whether an object with these labels is selected. */
export type LabelMatcher = (labels: Readonly<Record<string, string>> | undefined) => boolean;

/** Thrown for a selector the API server would reject (unknown operator, values where none go). */
export class LabelSelectorError extends TypeError {
  override name = "LabelSelectorError";
}

const NO_LABELS: Readonly<Record<string, string>> = Object.freeze({});

function has(labels: Readonly<Record<string, string>>, key: string): boolean {
  return Object.hasOwn(labels, key);
}

function compileRequirement(
  r: LabelSelectorRequirement,
): (l: Readonly<Record<string, string>>) => boolean {
  const where = `requirement ${JSON.stringify(r)}`;
  if (typeof r.key !== "string" || r.key === "") {
    throw new LabelSelectorError(`Invalid label selector: ${where} has no key`);
  }
  const values = r.values ?? [];
  const key = r.key;
  switch (r.operator) {
    case "In":
    case "NotIn": {
      if (values.length === 0) {
        throw new LabelSelectorError(
          `Invalid label selector: ${where}: operator ${r.operator} needs at least one value`,
        );
      }
      const set = new Set(values);
      return r.operator === "In"
        ? (l) => has(l, key) && set.has(l[key]!)
        : (l) => !has(l, key) || !set.has(l[key]!);
    }
    case "Exists":
    case "DoesNotExist":
      if (values.length !== 0) {
        throw new LabelSelectorError(
          `Invalid label selector: ${where}: operator ${r.operator} takes no values`,
        );
      }
      return r.operator === "Exists" ? (l) => has(l, key) : (l) => !has(l, key);
    default:
      throw new LabelSelectorError(
        `Invalid label selector: ${where}: operator "${r.operator}" is not In, NotIn, Exists or DoesNotExist`,
      );
  }
}

/**
 * Compiles a selector once for many matches. `undefined`/`null` selects everything unless
 * `absent: "nothing"` is given (Kubernetes' own reading of a nil selector).
 *
 * @throws {LabelSelectorError} for a selector the API server would reject.
 */
export function compileLabelSelector(
  selector: LabelSelector | null | undefined,
  options: { absent?: "everything" | "nothing" } = {},
): LabelMatcher {
  if (selector === undefined || selector === null) {
    const result = (options.absent ?? "everything") === "everything";
    return () => result;
  }
  const tests: ((l: Readonly<Record<string, string>>) => boolean)[] = [];
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    tests.push((l) => has(l, key) && l[key] === value);
  }
  for (const r of selector.matchExpressions ?? []) tests.push(compileRequirement(r));
  return (labels) => {
    const l = labels ?? NO_LABELS;
    for (const t of tests) if (!t(l)) return false;
    return true;
  };
}

/** Whether `labels` are selected (compiles each call; use {@linkcode compileLabelSelector} in loops). */
export function matchesLabelSelector(
  selector: LabelSelector | null | undefined,
  labels: Readonly<Record<string, string>> | undefined,
  options: { absent?: "everything" | "nothing" } = {},
): boolean {
  return compileLabelSelector(selector, options)(labels);
}

/**
 * The selector in `kubectl`'s text form (`team=blue,tier notin (test),!legacy`), for messages;
 * `<everything>` for an empty selector, `<none>` for an absent one.
 */
export function formatLabelSelector(selector: LabelSelector | null | undefined): string {
  if (selector === undefined || selector === null) return "<none>";
  const parts: string[] = [];
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) parts.push(`${k}=${v}`);
  for (const r of selector.matchExpressions ?? []) {
    const values = `(${(r.values ?? []).join(",")})`;
    if (r.operator === "In") parts.push(`${r.key} in ${values}`);
    else if (r.operator === "NotIn") parts.push(`${r.key} notin ${values}`);
    else if (r.operator === "Exists") parts.push(r.key);
    else if (r.operator === "DoesNotExist") parts.push(`!${r.key}`);
    else parts.push(`${r.key} ${r.operator} ${values}`);
  }
  return parts.length === 0 ? "<everything>" : parts.join(",");
}
