/**
 * The tools library holds a plan to the wire protocol's bounds before it leaves the device (issue 24):
 * a summary longer than `MAX_PLAN_SUMMARY_LENGTH` is shortened the same way at plan and at apply, so an
 * approved plan still compares equal; a plan over the other bounds is a PLAN_INVALID tool error
 * (test/tools/error-codes.test.ts).
 */
import fs from "node:fs";
import path from "node:path";
import t from "tap";
import { boundSummary, MAX_PLAN_SUMMARY_LENGTH, planProblem } from "../../src/protocol/index.js";
import { builtinTools, invokeTool } from "../../src/tools/index.js";
import { sandbox } from "./helpers.js";

t.test("create_directory of a deep path: a bounded summary that keeps both ends, and it still applies", async (t) => {
  const s = await sandbox(t);
  const levels = 900;
  const deep = Array.from({ length: levels }, () => "d").join("/");
  const plan = (await invokeTool(builtinTools, "create_directory", { path: deep }, { scope: s.scope })) as {
    diff: string;
    summary: string;
    createsDirectories: string[];
  };
  t.equal(plan.createsDirectories.length, levels);
  t.ok(plan.summary.length <= MAX_PLAN_SUMMARY_LENGTH, `a summary of ${plan.summary.length} characters`);
  t.ok(plan.summary.startsWith(`Create ${levels} folders: ${path.join(s.root, "d")}, `), "it starts as it did");
  t.ok(plan.summary.endsWith(path.join(s.root, deep)), "and ends with the deepest folder");
  t.match(plan.summary, / … \([\d,]+ characters not shown\) … /, "saying what it left out");
  t.equal(planProblem(plan), undefined, "within the protocol's bounds, as the server checks them");

  const applied = await invokeTool(
    builtinTools,
    "create_directory",
    { path: deep },
    { scope: s.scope, mode: "apply", expectedPlan: { diff: plan.diff, summary: plan.summary } },
  );
  t.match(applied, { applied: true });
  t.ok(fs.statSync(path.join(s.root, deep)).isDirectory(), "the approved plan applied: the shortened summary compared equal");
});

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

t.test("boundSummary: unchanged within the bound, the same every time, never a lone surrogate", async (t) => {
  t.equal(boundSummary("short"), "short");
  const exact = "x".repeat(MAX_PLAN_SUMMARY_LENGTH);
  t.equal(boundSummary(exact), exact);
  for (const unit of ["a", "😀", "a😀", "😀a"]) {
    for (const length of [MAX_PLAN_SUMMARY_LENGTH + 1, MAX_PLAN_SUMMARY_LENGTH + 2, 3 * MAX_PLAN_SUMMARY_LENGTH + 1]) {
      const long = unit.repeat(Math.ceil(length / unit.length));
      const bounded = boundSummary(long);
      t.ok(bounded.length <= MAX_PLAN_SUMMARY_LENGTH, `${JSON.stringify(unit)} × ${length}: ${bounded.length} characters`);
      t.equal(boundSummary(long), bounded, "deterministic");
      t.notMatch(bounded, LONE_SURROGATE, "no lone surrogate");
    }
  }
});
