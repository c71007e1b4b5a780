//! `dump` as text: a format reports what its header holds as a [`Report`] (fields, then
//! sections of numbered items with their own fields) and [`render`] lays it out, in the
//! spirit of `cryptsetup luksDump`: `Label:` padded to a column, items indented, their
//! fields after a tab. The format decides what is said and in which order; this module
//! decides how it looks. Reports hold no secrets (no keys, no key material).

use std::fmt::Write as _;

/// A label and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The label, without its colon.
    pub label: &'static str,
    /// The value.
    pub value: String,
}

impl Field {
    /// A field.
    pub fn new(label: &'static str, value: impl ToString) -> Field {
        Field {
            label,
            value: value.to_string(),
        }
    }
}

/// One thing of a section (a keyslot, a segment, a digest): `{prefix}{id}: {kind}`, then
/// its fields, each on a line of its own after a tab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Its id (`0`, `Key Slot 3`).
    pub id: String,
    /// What it is (`luks2`, `ENABLED`).
    pub kind: String,
    /// Its fields.
    pub fields: Vec<Field>,
}

/// A group of items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// A heading line (`Keyslots:`), if any.
    pub title: Option<&'static str>,
    /// Whether an empty line comes before the section.
    pub blank_before: bool,
    /// What goes before each item's id (`"  "`).
    pub item_prefix: &'static str,
    /// The column where item fields' values start, after the tab.
    pub value_column: usize,
    /// The items.
    pub items: Vec<Item>,
}

/// What a format shows of its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The first line.
    pub title: &'static str,
    /// Whether an empty line follows the title.
    pub blank_after_title: bool,
    /// The column where the top-level fields' values start.
    pub value_column: usize,
    /// Top-level fields.
    pub fields: Vec<Field>,
    /// Whether an empty line follows the top-level fields.
    pub blank_after_fields: bool,
    /// The sections, in order.
    pub sections: Vec<Section>,
}

/// `label:` padded to `column`, then the value.
fn field_line(out: &mut String, indent: &str, column: usize, f: &Field) {
    let label = format!("{}:", f.label);
    let _ = writeln!(out, "{indent}{label:<column$}{}", f.value);
}

/// The report as text, every line ending in a newline.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", r.title);
    if r.blank_after_title {
        out.push('\n');
    }
    for f in &r.fields {
        field_line(&mut out, "", r.value_column, f);
    }
    if r.blank_after_fields {
        out.push('\n');
    }
    for s in &r.sections {
        if s.blank_before {
            out.push('\n');
        }
        if let Some(title) = s.title {
            let _ = writeln!(out, "{title}");
        }
        for item in &s.items {
            let _ = writeln!(out, "{}{}: {}", s.item_prefix, item.id, item.kind);
            for f in &item.fields {
                field_line(&mut out, "\t", s.value_column, f);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_columns_blank_lines_and_items() {
        let r = Report {
            title: "T",
            blank_after_title: true,
            value_column: 8,
            fields: vec![Field::new("A", 1), Field::new("Longer", "x")],
            blank_after_fields: false,
            sections: vec![Section {
                title: Some("Items:"),
                blank_before: true,
                item_prefix: "  ",
                value_column: 4,
                items: vec![Item {
                    id: "0".into(),
                    kind: "k".into(),
                    fields: vec![Field::new("B", 2), Field::new("Wide", 3)],
                }],
            }],
        };
        assert_eq!(
            render(&r),
            "T\n\nA:      1\nLonger: x\n\nItems:\n  0: k\n\tB:  2\n\tWide:3\n"
        );
    }
}
