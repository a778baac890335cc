//! Where each step's box stands: rows from top to bottom in the order the
//! run goes, a step one row below the lowest step it comes after, a loop's
//! or parallel step's body in the rows just under it, and side by side the
//! steps that share a row.
//!
//! One pass over the steps in the flow's order (an arrow only points back
//! to a step listed earlier), so a flow of thousands of steps is placed in
//! linear time.

use crate::flow::FlowGraph;

/// A box's width, in pixels.
pub const BOX_WIDTH: u32 = 200;
/// A box's height, in pixels.
pub const BOX_HEIGHT: u32 = 48;
/// Space between boxes side by side.
const GAP_X: u32 = 48;
/// Space between rows (arrow labels go there).
const GAP_Y: u32 = 40;
/// Space around the drawing; send-backs bend into the right margin.
const MARGIN: u32 = 24;
/// Room on the right for send-back arrows to bend.
const BACK_ROOM: u32 = 80;

/// Every node's top-left corner, and the canvas size.
pub struct Places {
    /// By node index.
    pub at: Vec<(u32, u32)>,
    /// Canvas width.
    pub width: u32,
    /// Canvas height.
    pub height: u32,
}

impl Places {
    /// An arrow down from the bottom of `from` to the top of `to`.
    pub fn flow_points(&self, from: usize, to: usize) -> [[u32; 2]; 2] {
        let (fx, fy) = self.at[from];
        let (tx, ty) = self.at[to];
        [
            [fx + BOX_WIDTH / 2, fy + BOX_HEIGHT],
            [tx + BOX_WIDTH / 2, ty],
        ]
    }

    /// A send-back, from the right side of `from` up to the right side of
    /// `to`; the page bends it out to the right, apart from the rest.
    pub fn back_points(&self, from: usize, to: usize) -> [[u32; 2]; 2] {
        let (fx, fy) = self.at[from];
        let (tx, ty) = self.at[to];
        [
            [fx + BOX_WIDTH, fy + BOX_HEIGHT / 2],
            [tx + BOX_WIDTH, ty + BOX_HEIGHT / 2],
        ]
    }
}

/// Places every node of the graph.
pub fn place(graph: &FlowGraph<'_>) -> Places {
    let n = graph.nodes.len();
    let mut grid = Grid {
        row: vec![0; n],
        column: vec![0; n],
        end: vec![0; n],
        next_free: Vec::new(),
    };
    if !graph.lists.is_empty() {
        grid.list(graph, 0, 0, 0);
    }
    let at: Vec<(u32, u32)> = (0..n)
        .map(|i| {
            (
                MARGIN + grid.column[i] * (BOX_WIDTH + GAP_X),
                MARGIN + grid.row[i] * (BOX_HEIGHT + GAP_Y),
            )
        })
        .collect();
    let columns = grid.next_free.iter().copied().max().unwrap_or(0).max(1);
    let rows = u32::try_from(grid.next_free.len())
        .unwrap_or(u32::MAX)
        .max(1);
    Places {
        at,
        width: 2 * MARGIN + columns * (BOX_WIDTH + GAP_X) - GAP_X + BACK_ROOM,
        height: 2 * MARGIN + rows * (BOX_HEIGHT + GAP_Y) - GAP_Y,
    }
}

struct Grid {
    row: Vec<u32>,
    column: Vec<u32>,
    /// The last row a node's box or body takes.
    end: Vec<u32>,
    /// By row: the first column still free.
    next_free: Vec<u32>,
}

impl Grid {
    /// Places the nodes of `list` from row `first` on, no further left than
    /// `column`; returns the last row used.
    fn list(&mut self, graph: &FlowGraph<'_>, list: usize, first: u32, column: u32) -> u32 {
        let mut last = first;
        for &node in &graph.lists[list] {
            let preds = &graph.nodes[node].preds;
            let row = preds
                .iter()
                .map(|a| self.end[a.from] + 1)
                .max()
                .unwrap_or(first)
                .max(first);
            let hint = preds
                .first()
                .map_or(column, |a| self.column[a.from])
                .max(column);
            let col = self.take(row, hint);
            self.row[node] = row;
            self.column[node] = col;
            self.end[node] = match graph.body_of.get(&node) {
                Some(&body) => self.list(graph, body, row + 1, col),
                None => row,
            };
            last = last.max(self.end[node]);
        }
        last
    }

    /// The first free column of `row` at or right of `hint`, taken.
    fn take(&mut self, row: u32, hint: u32) -> u32 {
        let r = row as usize;
        if self.next_free.len() <= r {
            self.next_free.resize(r + 1, 0);
        }
        let col = self.next_free[r].max(hint);
        self.next_free[r] = col + 1;
        col
    }
}
