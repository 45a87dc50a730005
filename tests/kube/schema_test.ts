/** CRD schemas and selectors of the test server, without HTTP. */
import { deepStrictEqual, ok } from "node:assert/strict";
import { admit, unsupportedSchemaFeatures } from "../../lab/kube/schema.ts";
import { parseFieldSelector, parseLabelSelector } from "../../lab/kube/selectors.ts";
import { assertRejects } from "./_assert.ts";

const schema = {
  type: "object",
  properties: {
    spec: {
      type: "object",
      required: ["blocks"],
      properties: {
        blocks: {
          type: "array",
          minItems: 1,
          items: {
            type: "object",
            properties: {
              cidr: { type: "string", format: "cidr" },
              start: { type: "string", format: "ipv4" },
              stop: { type: "string", format: "ipv4" },
            },
            oneOf: [{ required: ["cidr"] }, { required: ["start", "stop"] }],
          },
        },
        port: { "x-kubernetes-int-or-string": true },
        note: { type: "string", nullable: true, maxLength: 5 },
        mode: { type: "string", default: "Stateful" },
        free: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
      },
    },
  },
};

function fields(r: ReturnType<typeof admit>): string[] {
  return r.causes.map((c) => `${c.field}: ${c.reason}`);
}

Deno.test("schema: defaults, pruning of unknown fields, preserve-unknown-fields, nullable", () => {
  const r = admit(schema, {
    apiVersion: "x/v1",
    kind: "X",
    metadata: { name: "a", labels: { a: "b" } },
    spec: {
      blocks: [{ cidr: "10.0.0.0/24" }],
      port: "http",
      note: null,
      typo: 1,
      free: { any: { thing: 1 } },
    },
  });
  deepStrictEqual(r.causes, []);
  deepStrictEqual(r.unknownFields, ["spec.typo"]);
  deepStrictEqual(r.value.spec, {
    blocks: [{ cidr: "10.0.0.0/24" }],
    port: "http",
    note: null,
    mode: "Stateful",
    free: { any: { thing: 1 } },
  });
  deepStrictEqual(
    (r.value.metadata as { labels: unknown }).labels,
    { a: "b" },
    "metadata is not pruned by the schema",
  );
});

Deno.test("schema: required, minItems, oneOf, formats, int-or-string and maxLength name their fields", () => {
  deepStrictEqual(fields(admit(schema, { spec: {} })), ["spec.blocks: FieldValueRequired"]);
  deepStrictEqual(fields(admit(schema, { spec: { blocks: [] } })), [
    "spec.blocks: FieldValueInvalid",
  ]);
  const r = admit(schema, {
    spec: {
      blocks: [{ cidr: "10.0.0.0/24", start: "10.0.0.1", stop: "10.0.0.9" }, {
        start: "300.0.0.1",
        stop: "10.0.0.2",
      }],
      port: 1.5,
      note: "toolong",
    },
  });
  deepStrictEqual(fields(r), [
    "spec.blocks[0]: FieldValueInvalid",
    "spec.blocks[1].start: FieldValueInvalid",
    "spec.port: FieldValueInvalid",
    "spec.note: FieldValueTooLong",
  ]);
});

Deno.test("schema: CEL rules are evaluated; rules outside the supported subset are found", () => {
  const block = {
    type: "object",
    properties: { cidr: { type: "string" }, start: { type: "string" }, stop: { type: "string" } },
    "x-kubernetes-validations": [{
      rule:
        "has(self.cidr) ? !has(self.start) && !has(self.stop) : has(self.start) && has(self.stop)",
      message: "a block is either cidr or both start and stop",
    }],
  };
  const list = {
    type: "array",
    items: block,
    "x-kubernetes-validations": [{
      rule: "self.all(b, !has(b.cidr) || isCIDR(b.cidr)) && size(self) < 3",
      fieldPath: "",
    }],
  };
  const s = { type: "object", properties: { blocks: list } };
  deepStrictEqual(
    admit(s, { blocks: [{ cidr: "10.0.0.0/8" }, { start: "10.1.0.1", stop: "10.1.0.9" }] }).causes,
    [],
  );
  const bad = admit(s, {
    blocks: [{ cidr: "10.0.0.0/8", start: "10.0.0.1" }, { stop: "1.2.3.4" }, { cidr: "nope" }],
  });
  deepStrictEqual(bad.causes.map((c) => `${c.field}: ${c.message}`), [
    `blocks[0]: Invalid value: "object": a block is either cidr or both start and stop`,
    `blocks[1]: Invalid value: "object": a block is either cidr or both start and stop`,
    `blocks: Invalid value: "array": failed rule: self.all(b, !has(b.cidr) || isCIDR(b.cidr)) && size(self) < 3`,
  ]);
  const unsupported = (rule: string) =>
    unsupportedSchemaFeatures({ type: "object", "x-kubernetes-validations": [{ rule }] }).length;
  deepStrictEqual(unsupported("self.a == oldSelf.a"), 1, "transition rules");
  deepStrictEqual(
    unsupported("quantity(self.q).isLessThan(quantity('1'))"),
    1,
    "unknown functions",
  );
  deepStrictEqual(
    unsupported("self.x.matches('^a+$') && self.y in ['a', 'b'] && self.z.size() <= 3"),
    0,
  );
});

Deno.test("selectors: label operators and field selectors; what cannot be read is a 400", async () => {
  const obj = (labels: Record<string, string>) => ({
    metadata: { name: "n", namespace: "ns", labels },
    spec: { nodeName: "a" },
  });
  const match = (sel: string, labels: Record<string, string>) =>
    parseLabelSelector(sel)(obj(labels));
  ok(match("a=1,b!=2", { a: "1" }));
  ok(match("a in (1, 2),!c", { a: "2" }));
  ok(!match("a notin (1,2)", { a: "2" }));
  ok(match("a", { a: "" }) && !match("a", {}));
  ok(match("n>3", { n: "4" }) && !match("n<3", { n: "4" }));
  ok(parseFieldSelector("spec.nodeName=a,metadata.namespace!=x", ["spec.nodeName"])(obj({})));
  await assertRejects(
    () => parseFieldSelector("spec.nodeName=a", []),
    "field label not supported: spec.nodeName",
  );
  await assertRejects(() => parseLabelSelector("a in b"), "unable to parse requirement");
  await assertRejects(() => parseLabelSelector("a=b c"), "unable to parse requirement");
});
