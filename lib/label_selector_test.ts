import { deepStrictEqual } from "node:assert/strict";
import {
  compileLabelSelector,
  formatLabelSelector,
  type LabelSelector,
  LabelSelectorError,
  matchesLabelSelector,
} from "./label_selector.ts";

Deno.test("label selector: matchLabels and each operator select as Kubernetes does", () => {
  const cases: [LabelSelector, Record<string, string> | undefined, boolean][] = [
    [{}, undefined, true],
    [{}, { a: "1" }, true],
    [{ matchLabels: { team: "blue" } }, { team: "blue", x: "y" }, true],
    [{ matchLabels: { team: "blue" } }, { team: "red" }, false],
    [{ matchLabels: { team: "blue" } }, undefined, false],
    [
      { matchExpressions: [{ key: "env", operator: "In", values: ["a", "b"] }] },
      { env: "b" },
      true,
    ],
    [{ matchExpressions: [{ key: "env", operator: "In", values: ["a"] }] }, { env: "c" }, false],
    [{ matchExpressions: [{ key: "env", operator: "In", values: ["a"] }] }, {}, false],
    // NotIn and DoesNotExist select objects without the key.
    [{ matchExpressions: [{ key: "env", operator: "NotIn", values: ["a"] }] }, {}, true],
    [{ matchExpressions: [{ key: "env", operator: "NotIn", values: ["a"] }] }, { env: "a" }, false],
    [{ matchExpressions: [{ key: "env", operator: "Exists" }] }, { env: "" }, true],
    [{ matchExpressions: [{ key: "env", operator: "Exists" }] }, {}, false],
    [{ matchExpressions: [{ key: "env", operator: "DoesNotExist" }] }, {}, true],
    [{ matchExpressions: [{ key: "env", operator: "DoesNotExist" }] }, { env: "x" }, false],
    // Everything is ANDed.
    [
      {
        matchLabels: { team: "blue" },
        matchExpressions: [{ key: "env", operator: "Exists" }],
      },
      { team: "blue" },
      false,
    ],
    // Inherited properties are not labels.
    [{ matchExpressions: [{ key: "toString", operator: "Exists" }] }, {}, false],
  ];
  for (const [sel, labels, want] of cases) {
    deepStrictEqual(
      matchesLabelSelector(sel, labels),
      want,
      `${formatLabelSelector(sel)} on ${JSON.stringify(labels)}: `,
    );
  }
});

Deno.test("label selector: an absent selector selects everything unless told it means nothing", () => {
  deepStrictEqual(compileLabelSelector(undefined)({ a: "b" }), true);
  deepStrictEqual(compileLabelSelector(null, { absent: "nothing" })({ a: "b" }), false);
});

Deno.test("label selector: selectors the API server rejects throw naming the requirement", () => {
  const bad: [LabelSelector, string][] = [
    [{ matchExpressions: [{ key: "a", operator: "In", values: [] }] }, "needs at least one value"],
    [{ matchExpressions: [{ key: "a", operator: "NotIn" }] }, "needs at least one value"],
    [{ matchExpressions: [{ key: "a", operator: "Exists", values: ["x"] }] }, "takes no values"],
    [{ matchExpressions: [{ key: "a", operator: "Gt", values: ["1"] }] }, `"Gt" is not In`],
    [{ matchExpressions: [{ key: "", operator: "Exists" }] }, "has no key"],
  ];
  for (const [sel, why] of bad) {
    let err: unknown;
    try {
      compileLabelSelector(sel);
    } catch (e) {
      err = e;
    }
    if (!(err instanceof LabelSelectorError) || !err.message.includes(why)) {
      throw new Error(`${JSON.stringify(sel)}: ${err}`);
    }
    if (!err.message.includes(`"key":"${sel.matchExpressions![0]!.key}"`)) throw err;
  }
});

Deno.test("label selector: text form as kubectl prints it", () => {
  deepStrictEqual(
    formatLabelSelector({
      matchLabels: { team: "blue" },
      matchExpressions: [
        { key: "env", operator: "In", values: ["a", "b"] },
        { key: "tier", operator: "NotIn", values: ["test"] },
        { key: "x", operator: "Exists" },
        { key: "legacy", operator: "DoesNotExist" },
      ],
    }),
    "team=blue,env in (a,b),tier notin (test),x,!legacy",
  );
  deepStrictEqual(formatLabelSelector({}), "<everything>");
  deepStrictEqual(formatLabelSelector(undefined), "<none>");
});
