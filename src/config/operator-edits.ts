import fs from 'node:fs';
import { isMap, isScalar, isSeq, parseDocument, type Document } from 'yaml';
import { BerthError, errnoOf, isBerthError } from '../base/errors.js';
import { withFileLock } from '../fs/lock.js';
import { atomicWriteFile } from '../fs/tree.js';
import { parseBerthConfig, type BerthConfig } from './berth-config.js';

/**
 * Edits of berth.yaml that keep the operator's comments and ordering (a yaml Document is
 * changed in place), are validated as a whole before anything is written, and land atomically
 * under a lock.
 */
export async function editBerthYaml(
  opts: { file: string; home: string; lockDir: string },
  edit: (doc: Document) => void,
): Promise<BerthConfig> {
  return withFileLock(opts.lockDir, 'berth-yaml.lock', () => {
    let text = '';
    try {
      text = fs.readFileSync(opts.file, 'utf8');
    } catch (err) {
      if (errnoOf(err) !== 'ENOENT') throw err;
    }
    const doc = parseDocument(text);
    // An empty file (or one holding only comments or `null`) is an empty mapping, never the document `null`.
    if (doc.contents === null || (isScalar(doc.contents) && doc.contents.value === null))
      doc.contents = doc.createNode({}) as unknown as typeof doc.contents;
    if (!isMap(doc.contents)) {
      throw new BerthError('CONFIG_INVALID', `${opts.file} is not a mapping of settings; berth does not edit it`, {
        issues: [{ field: '(root)', reason: 'must be a mapping' }],
      });
    }
    edit(doc);
    const next = doc.toString();
    let config: BerthConfig | undefined;
    // Parsed back from the bytes about to be published: berth never writes a file it cannot read and edit again.
    atomicWriteFile(opts.file, next, 0o600, (written) => {
      if (!isMap(parseDocument(written).contents))
        throw new BerthError('INTERNAL', `refusing to write ${opts.file}: the edit is not a mapping`);
      try {
        config = parseBerthConfig(written, opts.file, opts.home);
      } catch (err) {
        // Said of the edit, not the file: the file may not exist yet, and it was not written.
        if (!isBerthError(err, 'CONFIG_INVALID')) throw err;
        throw new BerthError('CONFIG_INVALID', `${opts.file} with this change would be invalid; nothing was written`, err.details, {
          cause: err,
        });
      }
    });
    return config as BerthConfig;
  });
}

function grantIndex(doc: Document, project: string, area: string): number {
  const seq = doc.getIn(['projects', project, 'shared_access'], true);
  if (!isSeq(seq)) return -1;
  return seq.items.findIndex((item) => {
    if (isScalar(item)) return item.value === area;
    if (isMap(item)) return item.get('name') === area;
    return false;
  });
}

export function grantEdit(project: string, area: string, mode: 'ro' | 'rw') {
  return (doc: Document) => {
    const value = mode === 'rw' ? doc.createNode({ name: area, mode: 'rw' }) : doc.createNode(area);
    const seq = doc.getIn(['projects', project, 'shared_access'], true);
    const at = grantIndex(doc, project, area);
    if (isSeq(seq)) {
      if (at >= 0) seq.items[at] = value;
      else seq.items.push(value);
    } else {
      doc.setIn(['projects', project, 'shared_access'], doc.createNode([value]));
    }
  };
}

export function revokeEdit(project: string, area: string) {
  return (doc: Document) => {
    const at = grantIndex(doc, project, area);
    const seq = doc.getIn(['projects', project, 'shared_access'], true);
    if (isSeq(seq) && at >= 0) seq.items.splice(at, 1);
  };
}

/**
 * Take every grant to a project out of berth.yaml (its project is deleted: one made again under
 * the name starts with none): its shared areas (`projects.<p>.shared_access`, and `projects.<p>`
 * once nothing else is left in it) and each secret's grants to it (`secrets.<NAME>.grants`).
 */
export function projectGrantsEdit(project: string) {
  return (doc: Document) => {
    if (doc.hasIn(['projects', project, 'shared_access'])) doc.deleteIn(['projects', project, 'shared_access']);
    const settings = doc.getIn(['projects', project], true);
    if (isMap(settings) && settings.items.length === 0) doc.deleteIn(['projects', project]);
    const secrets = doc.get('secrets', true);
    if (!isMap(secrets)) return;
    for (const pair of secrets.items) {
      const grants = isMap(pair.value) ? pair.value.get('grants', true) : undefined;
      if (!isSeq(grants)) continue;
      grants.items = grants.items.filter((g) => !(isMap(g) && g.get('project') === project));
    }
  };
}

export function privateWorkspaceEdit(project: string, path: string | undefined) {
  return (doc: Document) => {
    if (path === undefined) {
      if (doc.hasIn(['projects', project, 'private_workspace'])) doc.deleteIn(['projects', project, 'private_workspace']);
    } else doc.setIn(['projects', project, 'private_workspace'], path);
  };
}

/** Keys a config path may not name: they would reach an object's prototype, not a setting. */
const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);
export const CONFIG_PATH_MAX_DEPTH = 8;

/**
 * A berth.yaml path as `berth config` takes it: keys joined by dots (`bridges.signal.url`,
 * `routes.signal:+4915550000.project`). Bounded, and never a prototype's name.
 */
export function parseConfigPath(text: string): string[] {
  const keys = text.split('.');
  const bad = (reason: string) =>
    new BerthError('CONFIG_INVALID', `"${text.slice(0, 200)}" is not a berth.yaml path: ${reason}`, {
      issues: [{ field: 'path', reason }],
    });
  if (text.length > 512 || keys.length > CONFIG_PATH_MAX_DEPTH) throw bad(`at most ${CONFIG_PATH_MAX_DEPTH} keys, 512 characters`);
  for (const key of keys) {
    if (key === '') throw bad('a key is empty (two dots, or a dot at an end)');
    if (FORBIDDEN_KEYS.has(key)) throw bad(`"${key}" is not a setting`);
    if (!/^[\x21-\x7e]+$/.test(key)) throw bad('keys are printable ASCII without spaces');
  }
  return keys;
}

/** Set one value (creating the maps on the way); validated with the whole file before it is written. */
export function setEdit(path: string[], value: unknown) {
  return (doc: Document) => {
    const node = doc.getIn(path, true);
    // A scalar replaced by a scalar keeps its node, and so the comment beside it.
    if (isScalar(node) && (value === null || typeof value !== 'object')) node.value = value;
    else doc.setIn(path, doc.createNode(value));
  };
}

/** Remove one setting (its default applies again); a missing one is CONFIG_INVALID, naming it. */
export function unsetEdit(path: string[]) {
  return (doc: Document) => {
    if (!doc.hasIn(path))
      throw new BerthError('CONFIG_INVALID', 'nothing to unset', { issues: [{ field: path.join('.'), reason: 'not set in berth.yaml' }] });
    doc.deleteIn(path);
  };
}
