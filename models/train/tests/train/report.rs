//! `ember_train::report`.

use ember_train::report::*;

#[test]
fn a_font_that_cannot_be_registered_is_an_error() {
    let err = register_font("ember-test-font", b"not a font").unwrap_err();
    assert!(err.contains("cannot register the plot font"), "{err}");
    assert!(register_font("ember-test-font", epaint_default_fonts::HACK_REGULAR).is_ok());
    assert!(font().is_ok());
}

#[test]
fn epoch_values_are_count_weighted_means() {
    let dir = std::env::temp_dir().join(format!("ember-report-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("train/epoch-1")).unwrap();
    std::fs::create_dir_all(dir.join("valid/epoch-1")).unwrap();
    std::fs::write(dir.join("train/epoch-1/Loss.log"), "2.0,1\n1.0,1\n").unwrap();
    std::fs::write(dir.join("train/epoch-1/Accuracy.log"), "50,10\n100,30\n").unwrap();
    std::fs::write(dir.join("valid/epoch-1/Loss.log"), "0.5,1\n").unwrap();
    std::fs::write(dir.join("valid/epoch-1/Accuracy.log"), "90,4\n").unwrap();
    let rows = read_metrics(&dir, 2, &[3.0]);
    assert_eq!(rows.len(), 1, "epoch 2 has no logs");
    assert_eq!(rows[0].train_loss, 1.5);
    assert_eq!(rows[0].train_accuracy, 87.5);
    assert_eq!(rows[0].seconds, Some(3.0));
    write_csv(&dir.join("m.csv"), &rows).unwrap();
    let csv = std::fs::read_to_string(dir.join("m.csv")).unwrap();
    assert!(csv.starts_with("epoch,train_loss"));
    assert!(
        csv.contains("1,1.500000,87.5000,0.500000,90.0000,3.000"),
        "{csv}"
    );
    plot_curves(&dir.join("c.png"), "t", &rows).unwrap();
    assert!(
        std::fs::read(dir.join("c.png"))
            .unwrap()
            .starts_with(b"\x89PNG")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn diverged_runs_plot_with_gaps_instead_of_hanging() {
    let dir = std::env::temp_dir().join(format!("ember-report-nan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let row = |epoch, loss: f64| EpochMetrics {
        epoch,
        train_loss: loss,
        train_accuracy: 10.0,
        valid_loss: loss,
        valid_accuracy: 10.0,
        seconds: None,
    };
    // All non-finite (a run that diverged in its first epoch), and finite with a gap.
    for (name, rows) in [
        ("nan.png", vec![row(1, f64::NAN)]),
        ("inf.png", vec![row(1, f64::INFINITY), row(2, f64::NAN)]),
        ("gap.png", vec![row(1, 2.0), row(2, f64::NAN), row(3, 1.0)]),
    ] {
        let path = dir.join(name);
        plot_curves(&path, "diverged", &rows).unwrap();
        assert!(std::fs::read(&path).unwrap().starts_with(b"\x89PNG"));
    }
    write_csv(&dir.join("m.csv"), &[row(1, f64::NAN)]).unwrap();
    let csv = std::fs::read_to_string(dir.join("m.csv")).unwrap();
    assert!(csv.contains("1,NaN,"), "{csv}");
    std::fs::remove_dir_all(&dir).unwrap();
}
