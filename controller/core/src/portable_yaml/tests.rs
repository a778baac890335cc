use serde_json::{Value, json};

use super::{needs_quotes, to_string};

/// In [`YAML_1_1_NON_STRINGS`]: serde_yaml 0.9 writes it bare (it quotes
/// only what YAML 1.2 reads as a non-string).
const LEFT_BARE: bool = true;
/// In [`YAML_1_1_NON_STRINGS`]: serde_yaml 0.9 quotes it.
const QUOTED: bool = false;

/// Strings a YAML 1.1 reader (go-yaml v2, as in kubectl and Argo CD) reads
/// as a boolean, a null or a number when they are written bare, each with
/// whether serde_yaml writes it bare.
const YAML_1_1_NON_STRINGS: &[(&str, bool)] = &[
    ("y", LEFT_BARE),
    ("Y", LEFT_BARE),
    ("yes", LEFT_BARE),
    ("Yes", LEFT_BARE),
    ("YES", LEFT_BARE),
    ("n", LEFT_BARE),
    ("N", LEFT_BARE),
    ("no", LEFT_BARE),
    ("No", LEFT_BARE),
    ("NO", LEFT_BARE),
    ("true", QUOTED),
    ("True", QUOTED),
    ("TRUE", QUOTED),
    ("false", QUOTED),
    ("False", QUOTED),
    ("FALSE", QUOTED),
    ("on", LEFT_BARE),
    ("On", LEFT_BARE),
    ("ON", LEFT_BARE),
    ("off", LEFT_BARE),
    ("Off", LEFT_BARE),
    ("OFF", LEFT_BARE),
    ("~", QUOTED),
    ("null", QUOTED),
    ("Null", QUOTED),
    ("NULL", QUOTED),
    ("", QUOTED),
    ("0x1f", QUOTED),
    ("0o17", QUOTED),
    ("017", QUOTED),
    ("0b101", QUOTED),
    ("1_000", LEFT_BARE),
    ("1:20", LEFT_BARE),
    ("190:20:30", LEFT_BARE),
    ("-1:20", LEFT_BARE),
    ("+12", QUOTED),
    ("1.5e+3", QUOTED),
    ("1.", QUOTED),
    (".5", QUOTED),
    (".inf", QUOTED),
    ("-.inf", QUOTED),
    ("+.INF", QUOTED),
    (".nan", QUOTED),
    (".NaN", QUOTED),
    ("1e3", QUOTED),
    ("2001-12-14", LEFT_BARE),
    ("=", LEFT_BARE),
    ("<<", LEFT_BARE),
];

fn serde_yaml_writes_bare(s: &str) -> bool {
    let yaml = serde_yaml::to_string(s).expect("a string serializes");
    yaml.trim_end() == s
}

/// What this module exists for: serde_yaml 0.9 quotes only what YAML 1.2
/// reads as a non-string, so these reach kubectl bare and change meaning.
#[test]
fn serde_yaml_leaves_these_yaml_1_1_forms_bare() {
    let bare: Vec<&str> = YAML_1_1_NON_STRINGS
        .iter()
        .map(|(s, _)| *s)
        .filter(|s| serde_yaml_writes_bare(s))
        .collect();
    let marked: Vec<&str> = YAML_1_1_NON_STRINGS
        .iter()
        .filter(|(_, left_bare)| *left_bare)
        .map(|(s, _)| *s)
        .collect();
    assert_eq!(bare, marked);
}

#[test]
fn every_yaml_1_1_non_string_is_quoted_as_a_value_and_as_a_key() {
    for (s, _) in YAML_1_1_NON_STRINGS {
        assert!(needs_quotes(s), "`{s}` would be written bare");
        let yaml = to_string(&json!({ "value": s, "list": [s] })).expect("serializes");
        let expected = format!("list:\n- \"{s}\"\nvalue: \"{s}\"\n");
        assert_eq!(yaml, expected);
        if !s.is_empty() {
            let yaml = to_string(&json!({ *s: 1 })).expect("serializes");
            assert_eq!(yaml, format!("\"{s}\": 1\n"));
        }
    }
}

#[test]
fn words_and_sentences_stay_bare() {
    for s in [
        "string",
        "apiextensions.k8s.io/v1",
        "x-kubernetes-preserve-unknown-fields",
        "$steps.draft.output",
        "A sentence, with `code` and a colon:inside — and ünïcode.",
        "yesterday",
        "online",
    ] {
        assert!(!needs_quotes(s), "`{s}` was quoted");
    }
}

#[test]
fn indicators_and_separators_are_quoted() {
    for s in [
        "- item",
        "? key",
        ": x",
        "a: b",
        "a #b",
        "trailing ",
        "ends:",
        "#x",
        "&anchor",
        "*alias",
        "!tag",
        "|",
        ">",
        "'q'",
        "\"q\"",
        "%x",
        "@x",
        "`x",
        "[a]",
        "{a}",
        ",",
        " lead",
        "tab\there",
        "nel\u{85}here",
        "ls\u{2028}here",
        "\u{feff}bom",
    ] {
        assert!(needs_quotes(s), "`{s}` would be written bare");
    }
}

#[test]
fn the_layout_is_block_style_like_serde_yaml() {
    let value = json!({
        "kind": "Flow",
        "spec": {
            "steps": [
                {"key": "a", "sendBack": [{"exit": "on", "to": "b"}]},
                [1, 2],
                "text\nover two lines",
            ],
            "empty": {},
            "none": [],
            "note": "ends with a newline\nand more\n",
        },
    });
    let expected = "\
kind: Flow
spec:
  empty: {}
  none: []
  note: |
    ends with a newline
    and more
  steps:
  - key: a
    sendBack:
    - exit: \"on\"
      to: b
  - - 1
    - 2
  - |-
    text
    over two lines
";
    assert_eq!(to_string(&value).expect("serializes"), expected);
}

/// Tricky strings in every position read back identically through serde_yaml
/// (YAML 1.2), whether written bare, quoted or as a literal block.
#[test]
fn every_string_reads_back_the_same() {
    let mut strings: Vec<String> = YAML_1_1_NON_STRINGS
        .iter()
        .map(|(s, _)| s.to_string())
        .collect();
    strings.extend(
        [
            "a\n\nb",
            "\nleading newline",
            " leading space\nx",
            "two trailing\n\n",
            "trailing spaces  \nx",
            "tab\tinside\nline",
            "quote \" and \\ backslash",
            "ctrl \u{1} \u{7f} \u{85} \u{2028} \u{feff} end",
            "emoji 🦀\nsecond",
            "- dash\n- list",
            "key: value\n# comment",
        ]
        .map(str::to_owned),
    );
    for s in &strings {
        let value = json!({
            "v": s,
            "l": [s, {"k": s}],
            "m": { s.clone(): s },
        });
        let yaml = to_string(&value).expect("serializes");
        let back: Value = serde_yaml::from_str(&yaml)
            .unwrap_or_else(|e| panic!("{s:?} made unreadable YAML: {e}\n{yaml}"));
        assert_eq!(back, value, "{s:?} changed:\n{yaml}");
    }
}

/// The CRDs themselves survive the trip.
#[test]
fn the_crds_read_back_the_same() {
    for crd in crate::crds::all() {
        let value = serde_json::to_value(&crd).expect("serializes");
        let back: Value =
            serde_yaml::from_str(&to_string(&crd).expect("serializes")).expect("reads back");
        assert_eq!(back, value);
    }
}
