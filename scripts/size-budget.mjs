#!/usr/bin/env node
// The size budget (issue 39): source files over FILE_LINES lines and functions over FUNCTION_LINES
// lines are listed; one that is not in scripts/size-budget.json, or has grown past the size
// written there, fails (so nothing over budget grows). Run by `make test`; `--write` rewrites the
// allowlist to today's sizes (for a file that was split: its entry goes).
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const FILE_LINES = 400;
const FUNCTION_LINES = 120;
const ROOTS = ['src'];
const ALLOWLIST = new URL('./size-budget.json', import.meta.url);

const sourceFiles = (dir) =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sourceFiles(p) : /\.(ts|mts)$/.test(e.name) && !e.name.endsWith('.d.ts') ? [p] : [];
  });

/** A function's name as a reader finds it: its own, its variable's, its property's, or the call it is passed to; inside its enclosing functions. */
function nameOf(node, sf) {
  if (node.name && ts.isIdentifier(node.name)) return node.name.text;
  if (node.name) return node.name.getText(sf);
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent))
    return parent.name.getText(sf);
  if (ts.isCallExpression(parent)) {
    const callee = parent.expression.getText(sf).replace(/\s+/g, '');
    const first = parent.arguments[0];
    const label = first && ts.isStringLiteralLike(first) && first !== node ? ` ${first.text}` : '';
    return `${callee.slice(0, 60)}(${label.trim()}…)`;
  }
  return '<anonymous>';
}

function measure(file) {
  const text = fs.readFileSync(file, 'utf8');
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  const functions = [];
  const seen = new Map();
  const visit = (node, outer) => {
    let inner = outer;
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const start = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
      const end = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
      let name = [...outer, nameOf(node, sf)].join(' > ');
      const n = (seen.get(name) ?? 0) + 1;
      seen.set(name, n);
      if (n > 1) name += ` #${n}`;
      functions.push({ name, lines: end - start + 1 });
      inner = [...outer, nameOf(node, sf)];
    }
    ts.forEachChild(node, (child) => visit(child, inner));
  };
  visit(sf, []);
  return { lines, functions };
}

const over = { files: {}, functions: {} };
for (const root of ROOTS) {
  for (const file of sourceFiles(root).sort()) {
    const rel = file.split(path.sep).join('/');
    const m = measure(file);
    if (m.lines > FILE_LINES) over.files[rel] = m.lines;
    for (const f of m.functions) if (f.lines > FUNCTION_LINES) over.functions[`${rel}: ${f.name}`] = f.lines;
  }
}

if (process.argv.includes('--write')) {
  fs.writeFileSync(
    ALLOWLIST,
    `${JSON.stringify({ comment: 'Over the size budget today (scripts/size-budget.mjs): may shrink, may not grow.', ...over }, null, 2)}\n`,
  );
  console.log(
    `size budget: wrote ${Object.keys(over.files).length} file(s) and ${Object.keys(over.functions).length} function(s) to scripts/size-budget.json`,
  );
  process.exit(0);
}

const allowed = fs.existsSync(ALLOWLIST) ? JSON.parse(fs.readFileSync(ALLOWLIST, 'utf8')) : { files: {}, functions: {} };
let failed = 0;
const report = (kind, budget, found, allow) => {
  const names = Object.keys(found);
  if (names.length) console.log(`size budget: ${names.length} ${kind} over ${budget} lines`);
  for (const name of names) {
    const was = allow[name];
    const verdict =
      was === undefined
        ? 'NEW: split it (or, if it must be, add it to scripts/size-budget.json)'
        : found[name] > was
          ? `GREW from ${was}: bring it back`
          : found[name] < was
            ? `(allowed ${was}: lower the allowlist)`
            : '';
    if (was === undefined || found[name] > was) failed++;
    console.log(`  ${String(found[name]).padStart(5)}  ${name}${verdict ? `  ${verdict}` : ''}`);
  }
  for (const name of Object.keys(allow))
    if (!(name in found)) console.log(`  (${name} is within budget now: remove it from scripts/size-budget.json)`);
};
report('files', FILE_LINES, over.files, allowed.files ?? {});
report('functions', FUNCTION_LINES, over.functions, allowed.functions ?? {});
if (failed) {
  console.error(`size budget: ${failed} over budget and not allowed (scripts/size-budget.mjs)`);
  process.exit(1);
}
