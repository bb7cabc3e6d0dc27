import fs from 'node:fs';
import { isMap, isScalar, isSeq, parseDocument, type Document } from 'yaml';
import { BerthError, errnoOf } from '../errors.js';
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
    if (doc.contents === null || (isScalar(doc.contents) && doc.contents.value === null)) doc.contents = doc.createNode({}) as unknown as typeof doc.contents;
    if (!isMap(doc.contents)) {
      throw new BerthError('CONFIG_INVALID', `${opts.file} is not a mapping of settings; berth does not edit it`, { issues: [{ field: '(root)', reason: 'must be a mapping' }] });
    }
    edit(doc);
    const next = doc.toString();
    let config: BerthConfig | undefined;
    // Parsed back from the bytes about to be published: berth never writes a file it cannot read and edit again.
    atomicWriteFile(opts.file, next, 0o600, (written) => {
      if (!isMap(parseDocument(written).contents)) throw new BerthError('INTERNAL', `refusing to write ${opts.file}: the edit is not a mapping`);
      config = parseBerthConfig(written, opts.file, opts.home);
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

export function privateWorkspaceEdit(project: string, path: string | undefined) {
  return (doc: Document) => {
    if (path === undefined) {
      if (doc.hasIn(['projects', project, 'private_workspace'])) doc.deleteIn(['projects', project, 'private_workspace']);
    }
    else doc.setIn(['projects', project, 'private_workspace'], path);
  };
}
