import { z } from 'zod';
import { ErrorBodySchema } from '../../admin/views.js';
import { ProjectNameSchema } from '../../config/metadata.js';

/** Shared pieces of the route definitions: a JSON body/response, the error responses, params. */
export const json = <S extends z.ZodType>(schema: S, description: string) => ({ content: { 'application/json': { schema } }, description });

export const errorResponses = (notFound = 'PROJECT_NOT_FOUND') => ({
  400: json(ErrorBodySchema, 'CONFIG_INVALID: the fields at fault are listed'),
  401: json(ErrorBodySchema, 'UNAUTHORIZED'),
  404: json(ErrorBodySchema, notFound),
});

export const NameParams = z.object({ name: ProjectNameSchema });
