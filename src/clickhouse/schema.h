// The ClickHouse side of gpuwhy's schema (docs/clickhouse.md): one MergeTree table per kind of
// outbox entry, each with the node, the spool (the local database file) and the batch (the
// outbox entry) in front of the local columns; and per node a database of views named like the
// local ones (`events`, `process_names`, `events_all`), so the brief's SQL runs there unchanged.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "clickhouse/client.h"

namespace gw {

// Node names: 1–64 of [A-Za-z0-9._-] (host names fit).
Status ValidateNodeName(const std::string& node);

// The database holding `node`'s views: "<db>_node_<node, other characters as _>_<hash>".
std::string NodeViewDatabase(const ClickHouseUrl& url, const std::string& node);

// CREATE … IF NOT EXISTS for the database and every table.
std::vector<std::string> TableStatements(const std::string& database);
// The node's view database and views (replaced, so a newer gpuwhy's views win).
std::vector<std::string> NodeViewStatements(const ClickHouseUrl& url, const std::string& node);

// The columns `table` of the client's database has (system.columns): a database an older
// gpuwhy made lacks the newest ones.
StatusOr<std::set<std::string>> ColumnsOf(const ClickHouseClient& client,
                                          const std::string& table);

// Runs both; the sink calls it before its first insert, the readers never.
Status EnsureClickHouseSchema(const ClickHouseClient& client, const std::string& node);

}  // namespace gw
