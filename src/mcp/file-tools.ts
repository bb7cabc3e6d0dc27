import { z } from 'zod';
import { FileInfoSchema as InfoSchema } from '../fs/sandbox.js';
import { FolderEntrySchema, FolderRefSchema, ListScopeSchema, type FileToolsCaller } from '../file-tools/service.js';
import { WorkspaceProfileSchema } from '../file-tools/workspace-profile.js';
import { READ_ONLY, tool, type ToolSpec } from './tool-spec.js';

/** A file's info, or `{path, exists: false}`. */
const FileInfoSchema = InfoSchema.partial({ type: true, size: true, modified: true }).extend({ exists: z.boolean().optional() });

/** The agent's file tools on its gateway socket. None takes an agent id, session or level: the socket is the identity. */
export const FILE_TOOLS: ToolSpec<FileToolsCaller>[] = [
  tool({
    name: 'list_folders',
    annotations: READ_ONLY,
    description: 'Folders you may see: my_private, my_shared, team_private, team_shared, org_shared (others’ shared folders you may read).',
    input: z.object({ scope: ListScopeSchema }).strict(),
    output: z.object({ folders: z.array(FolderEntrySchema) }),
    run: (g: FileToolsCaller, { scope }) => ({ folders: g.listFolders(scope) }),
  }),
  tool({
    name: 'workspace_profile',
    annotations: READ_ONLY,
    description: 'Your workspace: ecosystem, package manager, and its format/lint/test commands (detected from its files).',
    input: z.object({}).strict(),
    output: WorkspaceProfileSchema,
    run: (g: FileToolsCaller) => g.profile(),
  }),
  tool({
    name: 'read_file_by_id',
    annotations: READ_ONLY,
    description:
      "Read a text file: folderId (uuid from list_folders) + scope (private|shared) + path relative to that scope. The answer's text is the file's content.",
    input: FolderRefSchema,
    output: z.object({ path: z.string(), content: z.string() }),
    run: (g: FileToolsCaller, ref) => g.read(ref),
    text: (out) => out.content,
  }),
  tool({
    name: 'write_file_by_id',
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true },
    description: 'Write a text file (atomically) in a folder you may write.',
    input: FolderRefSchema.extend({
      content: z
        .string()
        .max(4 * 1024 * 1024)
        .describe('The whole new content (text, at most 4 MiB).'),
    }).strict(),
    output: FileInfoSchema,
    run: (g: FileToolsCaller, { content, ...ref }) => g.write(ref, content),
  }),
  tool({
    name: 'delete_file_by_id',
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true },
    description: 'Delete a file in a folder you may write.',
    input: FolderRefSchema,
    output: z.object({ path: z.string(), deleted: z.boolean() }),
    run: (g: FileToolsCaller, ref) => g.remove(ref),
  }),
  tool({
    name: 'get_file_info_by_id',
    annotations: READ_ONLY,
    description: 'Type, size and modification time of a path.',
    input: FolderRefSchema,
    output: FileInfoSchema,
    run: (g: FileToolsCaller, ref) => g.info(ref),
  }),
];
