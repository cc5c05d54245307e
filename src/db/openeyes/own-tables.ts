/**
 * The service's own tables on an OpenEyes database: every table the service keeps for itself (audit
 * trail, rate-limit counters, attempt markers, attachment digests, console sessions, received DICOM
 * instances, answered HL7 messages) is named with the
 * prefix `cra_` there, beside OpenEyes's tables, and created by the migrations of `migrations/`. Query code
 * names them as in the own schema; this plugin renames them in every statement (query builders and the
 * `sql.table` / `sql.ref` parts of raw SQL), so no module knows which schema it runs on.
 */
import type {
  KyselyPlugin,
  PluginTransformQueryArgs,
  PluginTransformResultArgs,
  QueryResult,
  RootOperationNode,
  TableNode,
  UnknownRow,
} from 'kysely';
import { IdentifierNode, OperationNodeTransformer } from 'kysely';

/** The service's own tables (not OpenEyes's), by their name in the own schema. */
export const OWN_TABLES = [
  'audit_event',
  'rate_limit_counter',
  'request_routine_attempt',
  'attachment_data_digest',
  'console_session',
  'console_secret',
  'dicom_received_instance',
  'dicom_instance_index',
  'device_event',
  'mwl_entry',
  'biometry_lens_review',
  'hl7_message',
] as const;

export const OWN_TABLE_PREFIX = 'cra_';

const OWN = new Set<string>(OWN_TABLES);

class OwnTableRenamer extends OperationNodeTransformer {
  protected override transformTable(node: TableNode): TableNode {
    const { identifier } = node.table;
    if (node.table.schema !== undefined || !OWN.has(identifier.name)) return node;
    return {
      ...node,
      table: { ...node.table, identifier: IdentifierNode.create(OWN_TABLE_PREFIX + identifier.name) },
    };
  }
}

/** Renames the service's own tables to `cra_<name>` in every statement. */
export class OwnTablePrefixPlugin implements KyselyPlugin {
  readonly #renamer = new OwnTableRenamer();

  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    return this.#renamer.transformNode(args.node, args.queryId);
  }

  async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return args.result;
  }
}
