/**
 * Tool forms on /devices (issue 26, "Running tools from /devices"): fields in the tool's own order
 * (the stored announcement keeps it), enums as selects, a string-or-list as one entry per line, each
 * field with its description and an example, and edit_file's `edits` as repeatable groups of fields
 * added and removed by submit buttons, so without JavaScript.
 */
import t from "tap";
import { builtinContract } from "../../src/plugins/host/tool-contracts.js";
import { formAction, formFields, readForm } from "../../src/web/schema-form.js";
import { pair, ScriptedDevice, signedIn, startHostServer } from "./helpers.js";

const contract = (name: string) => builtinContract(name)!;

t.test("the schema's kinds: groups for arrays of objects, lines for a string or a list, examples", async (t) => {
  const grep = formFields(contract("grep").inputSchema);
  t.same(grep.map((f) => f.name).slice(0, 3), ["pattern", "path", "literal"], "the tool's own order");
  t.same(
    grep.filter((f) => f.name === "include" || f.name === "exclude").map((f) => f.kind),
    ["lines", "lines"],
  );
  t.match(
    grep.find((f) => f.name === "pattern"),
    { description: /Regular expression/, example: "TODO" },
  );
  t.match(
    formFields(contract("glob").inputSchema).find((f) => f.name === "type"),
    { kind: "select", options: ["any", "file", "directory"] },
  );

  const edit = contract("edit_file").inputSchema;
  const edits = formFields(edit).find((f) => f.name === "edits")!;
  t.match(edits, { kind: "group", itemLabel: "Edit", maxItems: 100 });
  t.same(
    edits.items!.map((item) => item.map((f) => [f.control, f.kind])),
    [
      [
        ["arg.edits.0.find", "textarea"],
        ["arg.edits.0.replace", "textarea"],
      ],
    ],
  );

  const body = { "arg.path": "src/math.js", "arg.edits.0.find": "a - b", "arg.edits.0.replace": "a + b", "arg.edits.1.find": "x", "arg.edits.1.replace": "" };
  t.same(
    readForm(edit, body),
    {
      ok: true,
      input: {
        path: "src/math.js",
        edits: [
          { find: "a - b", replace: "a + b" },
          { find: "x", replace: "" },
        ],
      },
    },
    "an empty replacement deletes",
  );
  t.same(readForm(contract("grep").inputSchema, { "arg.pattern": "x", "arg.include": "*.ts\n*.js\n" }), {
    ok: true,
    input: { pattern: "x", include: ["*.ts", "*.js"] },
  });
  t.match(readForm(edit, { "arg.path": "a" }), { ok: false, error: /Edits: this field is required/ });
  t.match(readForm(edit, { "arg.path": "a", "arg.edits.0.replace": "y" }), { ok: false, error: /Edits: Edit 1, Find: this field is required/ });

  // Add and remove keep the other items' values, renumbered.
  const added = formFields(edit, { ...body, _add: "edits" }, formAction({ _add: "edits" }));
  t.same(
    added.find((f) => f.name === "edits")!.items!.map((item) => item.map((f) => f.value)),
    [
      ["a - b", "a + b"],
      ["x", ""],
      ["", ""],
    ],
  );
  const removed = formFields(edit, body, formAction({ _remove: "edits.0" }));
  t.same(
    removed.find((f) => f.name === "edits")!.items!.map((item) => item.map((f) => [f.control, f.value])),
    [
      [
        ["arg.edits.0.find", "x"],
        ["arg.edits.0.replace", ""],
      ],
    ],
  );
});

t.test("over HTTP: read_file's Start line before End line; edits added and removed without JavaScript", async (t) => {
  const server = await startHostServer(t);
  const owner = await signedIn(server.url);
  const { deviceId, token } = await pair(owner, "laptop");
  const device = new ScriptedDevice(server.url, deviceId, token);
  await device.hello([contract("read_file"), contract("edit_file"), contract("stat")]);
  await device.connect();
  t.teardown(() => device.disconnect());

  const read = await (await owner.get(`/devices/${deviceId}/tools/read_file`)).text();
  t.ok(read.indexOf(">Start line") > 0 && read.indexOf(">Start line") < read.indexOf(">End line"), "Start line comes first, as the tool declares it");
  const stat = await (await owner.get(`/devices/${deviceId}/tools/stat`)).text();
  t.match(
    stat,
    /<input type="checkbox" id="arg-1" name="arg.followSymlinks" value="true" aria-describedby="arg-1-hint">\s*<label for="arg-1">Follow symlinks<\/label>/,
    "a checkbox, then its label",
  );
  t.match(stat, /Example: <code>src\/index.js<\/code>/);

  const form = await (await owner.get(`/devices/${deviceId}/tools/edit_file`)).text();
  t.match(form, /<legend>Edit 1<\/legend>/);
  t.match(form, /name="_add" value="edits" formnovalidate>Add another edit<\/button>/);
  t.notMatch(form, /name="_remove"/, "one edit cannot be removed");

  const base = { "arg.path": "f", "arg.edits.0.find": "a", "arg.edits.0.replace": "b" };
  const more = await owner.request("POST", `/devices/${deviceId}/tools/edit_file`, { form: { ...base, _add: "edits" } });
  t.equal(more.status, 200, "a whole page, without JavaScript");
  const moreHtml = await more.text();
  t.match(moreHtml, /<legend>Edit 2<\/legend>/);
  t.match(moreHtml, /name="arg.edits.0.find"[^>]*>a<\/textarea>/, "the values are kept");
  t.match(moreHtml, /name="_remove" value="edits.1" formnovalidate>Remove edit 2<\/button>/);
  t.equal(device.events.filter((e) => e.event === "call").length, 0, "nothing ran");

  const fewer = await owner.request("POST", `/devices/${deviceId}/tools/edit_file`, {
    form: { ...base, "arg.edits.1.find": "c", "arg.edits.1.replace": "d", _remove: "edits.0" },
    headers: { "hx-request": "true" },
  });
  t.equal(fewer.status, 200);
  const fewerHtml = await fewer.text();
  t.match(fewerHtml, /name="arg.edits.0.find"[^>]*>c<\/textarea>/, "the other edit moves up");
  t.notMatch(fewerHtml, /Edit 2/);

  device.serve((call) => (call.mode === "plan" ? { diff: "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n", summary: "Edit f: 2 replacements" } : { ok: true }));
  const proposed = await owner.request("POST", `/devices/${deviceId}/tools/edit_file`, {
    form: { ...base, "arg.edits.1.find": "c", "arg.edits.1.replace": "d" },
  });
  t.equal(proposed.status, 202);
  t.match(await proposed.text(), /Proposed: Edit f: 2 replacements/);
});
