# bash completion for backburner; generated from its parser by `backburner completion bash`.
_backburner_node() {  # $1: command path -> _bb_subs, _bb_opts, _bb_job
    case "$1" in
        "") _bb_subs="apply bench compare completion extents govern layout policies readahead report restore run slowdisk store trace"; _bb_opts="-h --help -V --version --debug"; _bb_job=0;;
        "apply") _bb_subs=""; _bb_opts="-h --help --scheduler --devices --kernel --unit --policy --io --cpu --io-weight --cpu-weight --root --dry-run --force --remove"; _bb_job=0;;
        "bench") _bb_subs=""; _bb_opts="-h --help --preset --study --probe --ready-line --ready-file --load --policy --scheduler --device --prepare --prepare-during -r --runs --trials -w --warmup --cold --warm --seed --settle --load-lifetime --block --probe-layout --probe-root --timeout --abort-factor --rotational --trace --output -o --fallback --resume --html --export-json --export-markdown --export-csv --show-output --ignore-failure -q --quiet"; _bb_job=0;;
        "compare") _bb_subs=""; _bb_opts="-h --help --by --run --machine --since --plot --tolerance --fail-if-slower --fail-if-changed"; _bb_job=0;;
        "completion") _bb_subs="bash"; _bb_opts="-h --help"; _bb_job=0;;
        "extents") _bb_subs="check map save show verify"; _bb_opts="-h --help"; _bb_job=0;;
        "extents check") _bb_subs=""; _bb_opts="-h --help --quick"; _bb_job=0;;
        "extents map") _bb_subs=""; _bb_opts="-h --help --dm-table --loop-args --zero-unwritten --allow-shared"; _bb_job=0;;
        "extents save") _bb_subs=""; _bb_opts="-h --help -o --output --force"; _bb_job=0;;
        "extents show") _bb_subs=""; _bb_opts="-h --help --json"; _bb_job=0;;
        "extents verify") _bb_subs=""; _bb_opts="-h --help --include-unwritten"; _bb_job=0;;
        "govern") _bb_subs="check explain run status"; _bb_opts="-h --help"; _bb_job=0;;
        "govern check") _bb_subs=""; _bb_opts="-h --help --no-defaults"; _bb_job=0;;
        "govern explain") _bb_subs=""; _bb_opts="-h --help --rules --no-defaults"; _bb_job=0;;
        "govern run") _bb_subs=""; _bb_opts="-h --help --rules --no-defaults --dry-run --ready-file -q --quiet --no-exec-filter"; _bb_job=0;;
        "govern status") _bb_subs=""; _bb_opts="-h --help --json"; _bb_job=0;;
        "layout") _bb_subs="build-ext4 check order"; _bb_opts="-h --help"; _bb_job=0;;
        "layout build-ext4") _bb_subs=""; _bb_opts="-h --help --pack --size --root"; _bb_job=0;;
        "layout check") _bb_subs=""; _bb_opts="-h --help --pack --root"; _bb_job=0;;
        "layout order") _bb_subs=""; _bb_opts="-h --help --emit --root --null -o --output"; _bb_job=0;;
        "policies") _bb_subs=""; _bb_opts="-h --help"; _bb_job=0;;
        "readahead") _bb_subs="record replay show"; _bb_opts="-h --help"; _bb_job=0;;
        "readahead record") _bb_subs=""; _bb_opts="-h --help -o --output --system --seconds --mount --read-ahead-kb --keep-read-ahead --drop-caches --hash"; _bb_job=1;;
        "readahead replay") _bb_subs=""; _bb_opts="-h --help --wait --budget --deadline --order --io --rebase"; _bb_job=0;;
        "readahead show") _bb_subs=""; _bb_opts="-h --help --files --verify"; _bb_job=0;;
        "report") _bb_subs=""; _bb_opts="-h --help --run --machine --since --recommend --html --plot --format --violin --export --output -o --tolerance"; _bb_job=0;;
        "restore") _bb_subs=""; _bb_opts="-h --help --pid"; _bb_job=0;;
        "run") _bb_subs=""; _bb_opts="-h --help --policy --io --cpu --io-weight --cpu-weight --no-cgroup --pid --force --slice -v --verbose"; _bb_job=1;;
        "slowdisk") _bb_subs="create list profiles remove stats"; _bb_opts="-h --help"; _bb_job=0;;
        "slowdisk create") _bb_subs=""; _bb_opts="-h --help --profile --size --read-only --scheduler"; _bb_job=0;;
        "slowdisk list") _bb_subs=""; _bb_opts="-h --help"; _bb_job=0;;
        "slowdisk profiles") _bb_subs=""; _bb_opts="-h --help --json"; _bb_job=0;;
        "slowdisk remove") _bb_subs=""; _bb_opts="-h --help"; _bb_job=0;;
        "slowdisk stats") _bb_subs=""; _bb_opts="-h --help --json"; _bb_job=0;;
        "store") _bb_subs="copy"; _bb_opts="-h --help"; _bb_job=0;;
        "store copy") _bb_subs=""; _bb_opts="-h --help"; _bb_job=0;;
        "trace") _bb_subs="compare diff engines record show"; _bb_opts="-h --help"; _bb_job=0;;
        "trace compare") _bb_subs=""; _bb_opts="-h --help --runs --engine --overhead --sample-ms --force -q --quiet -o --output --html --format --top"; _bb_job=1;;
        "trace diff") _bb_subs=""; _bb_opts="-h --help --html --format --top"; _bb_job=0;;
        "trace engines") _bb_subs=""; _bb_opts="-h --help"; _bb_job=0;;
        "trace record") _bb_subs=""; _bb_opts="-h --help -o --output --runs --engine --overhead --sample-ms --force -q --quiet"; _bb_job=1;;
        "trace show") _bb_subs=""; _bb_opts="-h --help --by --run --format --top"; _bb_job=0;;
        *) _bb_subs=""; _bb_opts=""; _bb_job=0;;
    esac
}

_backburner_values() {  # $1: command path, $2: option -> its choices; fails if it takes no value
    case "$1|$2" in
        "apply|--scheduler") echo "__any__";;
        "apply|--devices") echo "all non-rotational rotational";;
        "apply|--kernel") echo "__any__";;
        "apply|--unit") echo "__any__";;
        "apply|--policy") echo "__any__";;
        "apply|--io") echo "__any__";;
        "apply|--cpu") echo "__any__";;
        "apply|--io-weight") echo "__any__";;
        "apply|--cpu-weight") echo "__any__";;
        "apply|--root") echo "__any__";;
        "bench|--preset") echo "office-hdd quick";;
        "bench|--study") echo "__any__";;
        "bench|--probe") echo "__any__";;
        "bench|--ready-line") echo "__any__";;
        "bench|--ready-file") echo "__any__";;
        "bench|--load") echo "__any__";;
        "bench|--policy") echo "__any__";;
        "bench|--scheduler") echo "__any__";;
        "bench|--device") echo "__any__";;
        "bench|--prepare") echo "__any__";;
        "bench|--prepare-during") echo "__any__";;
        "bench|-r") echo "__any__";;
        "bench|--runs") echo "__any__";;
        "bench|--trials") echo "__any__";;
        "bench|-w") echo "__any__";;
        "bench|--warmup") echo "__any__";;
        "bench|--seed") echo "__any__";;
        "bench|--settle") echo "__any__";;
        "bench|--load-lifetime") echo "cell trial";;
        "bench|--block") echo "__any__";;
        "bench|--probe-layout") echo "aged directories touched";;
        "bench|--probe-root") echo "__any__";;
        "bench|--timeout") echo "__any__";;
        "bench|--abort-factor") echo "__any__";;
        "bench|--rotational") echo "0 1";;
        "bench|--output") echo "__any__";;
        "bench|-o") echo "__any__";;
        "bench|--fallback") echo "__any__";;
        "bench|--resume") echo "__any__";;
        "bench|--html") echo "__any__";;
        "bench|--export-json") echo "__any__";;
        "bench|--export-markdown") echo "__any__";;
        "bench|--export-csv") echo "__any__";;
        "compare|--by") echo "kernel machine run";;
        "compare|--run") echo "__any__";;
        "compare|--machine") echo "__any__";;
        "compare|--since") echo "__any__";;
        "compare|--plot") echo "__any__";;
        "compare|--tolerance") echo "__any__";;
        "compare|--fail-if-slower") echo "__any__";;
        "extents save|-o") echo "__any__";;
        "extents save|--output") echo "__any__";;
        "govern explain|--rules") echo "__any__";;
        "govern run|--rules") echo "__any__";;
        "govern run|--ready-file") echo "__any__";;
        "layout build-ext4|--pack") echo "__any__";;
        "layout build-ext4|--size") echo "__any__";;
        "layout build-ext4|--root") echo "__any__";;
        "layout check|--pack") echo "__any__";;
        "layout check|--root") echo "__any__";;
        "layout order|--emit") echo "list mksquashfs-sort xorriso-weights";;
        "layout order|--root") echo "__any__";;
        "layout order|-o") echo "__any__";;
        "layout order|--output") echo "__any__";;
        "readahead record|-o") echo "__any__";;
        "readahead record|--output") echo "__any__";;
        "readahead record|--seconds") echo "__any__";;
        "readahead record|--mount") echo "__any__";;
        "readahead record|--read-ahead-kb") echo "__any__";;
        "readahead replay|--budget") echo "__any__";;
        "readahead replay|--deadline") echo "__any__";;
        "readahead replay|--order") echo "access auto physical";;
        "readahead replay|--io") echo "__any__";;
        "readahead replay|--rebase") echo "__any__";;
        "report|--run") echo "__any__";;
        "report|--machine") echo "__any__";;
        "report|--since") echo "__any__";;
        "report|--html") echo "__any__";;
        "report|--plot") echo "__any__";;
        "report|--format") echo "__any__";;
        "report|--export") echo "csv hyperfine-json json markdown";;
        "report|--output") echo "__any__";;
        "report|-o") echo "__any__";;
        "report|--tolerance") echo "__any__";;
        "restore|--pid") echo "__any__";;
        "run|--policy") echo "__any__";;
        "run|--io") echo "__any__";;
        "run|--cpu") echo "__any__";;
        "run|--io-weight") echo "__any__";;
        "run|--cpu-weight") echo "__any__";;
        "run|--pid") echo "__any__";;
        "run|--slice") echo "__any__";;
        "slowdisk create|--profile") echo "__any__";;
        "slowdisk create|--size") echo "__any__";;
        "slowdisk create|--scheduler") echo "__any__";;
        "trace compare|--runs") echo "__any__";;
        "trace compare|--engine") echo "auto none perf strace";;
        "trace compare|--sample-ms") echo "__any__";;
        "trace compare|-o") echo "__any__";;
        "trace compare|--output") echo "__any__";;
        "trace compare|--html") echo "__any__";;
        "trace compare|--format") echo "json markdown text";;
        "trace compare|--top") echo "__any__";;
        "trace diff|--html") echo "__any__";;
        "trace diff|--format") echo "json markdown text";;
        "trace diff|--top") echo "__any__";;
        "trace record|-o") echo "__any__";;
        "trace record|--output") echo "__any__";;
        "trace record|--runs") echo "__any__";;
        "trace record|--engine") echo "auto none perf strace";;
        "trace record|--sample-ms") echo "__any__";;
        "trace show|--by") echo "merged process thread";;
        "trace show|--run") echo "__any__";;
        "trace show|--format") echo "json markdown text";;
        "trace show|--top") echo "__any__";;
        *) return 1;;
    esac
}

_backburner() {
    local cur="${COMP_WORDS[COMP_CWORD]}" path="" word values i=1 job=-1
    COMPREPLY=()
    while (( i < COMP_CWORD )); do
        word="${COMP_WORDS[i]}"
        _backburner_node "$path"
        if (( _bb_job )) && [[ $word == -- || $word != -* ]]; then
            job=$i
            [[ $word == -- ]] && job=$((i + 1))
            break
        fi
        if [[ $word == -* ]]; then
            if [[ $word != *=* ]] && _backburner_values "$path" "$word" >/dev/null; then
                i=$((i + 1))
            fi
        elif [[ " $_bb_subs " == *" $word "* ]]; then
            path="${path:+$path }$word"
        fi
        i=$((i + 1))
    done
    if (( job >= 0 )); then  # the job's own command line
        if (( COMP_CWORD == job )); then
            COMPREPLY=( $(compgen -c -- "$cur") )
        else
            compopt -o default 2>/dev/null
        fi
        return 0
    fi
    _backburner_node "$path"
    if (( COMP_CWORD > 1 )) && values=$(_backburner_values "$path" "${COMP_WORDS[COMP_CWORD-1]}"); then
        if [[ $values == __any__ ]]; then
            compopt -o default 2>/dev/null
        else
            COMPREPLY=( $(compgen -W "$values" -- "$cur") )
        fi
        return 0
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=( $(compgen -W "$_bb_opts" -- "$cur") )
    elif [[ -n $_bb_subs ]]; then
        COMPREPLY=( $(compgen -W "$_bb_subs" -- "$cur") )
    else
        compopt -o default 2>/dev/null
    fi
    return 0
}
complete -F _backburner backburner
