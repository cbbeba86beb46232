// Loads one window of a recording into a WindowData: the window as the store defines it
// (store/window.h, shared with the MCP tools) and its rows as typed structs
// (store/window_rows.h). Analysis sees no SQL.
#pragma once

#include "analysis/window_data.h"
#include "base/status.h"
#include "store/window.h"

namespace gw {

class StoreReader;

StatusOr<WindowData> LoadWindow(StoreReader& reader, const WindowRequest& request);

}  // namespace gw
