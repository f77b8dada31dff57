# bash completion for backburner; generated from its parser by `backburner completion bash`.
_backburner_node() {  # $1: command path -> _bb_subs, _bb_opts, _bb_job
    case "$1" in
        "") _bb_subs="apply bench compare completion policies report restore run slowdisk"; _bb_opts="-h --help -V --version --debug"; _bb_job=0;;
        "apply") _bb_subs=""; _bb_opts="-h --help --scheduler --devices --kernel --unit --policy --io --cpu --io-weight --cpu-weight --root --dry-run --force --remove"; _bb_job=0;;
        "bench") _bb_subs=""; _bb_opts="-h --help --preset --probe --ready-line --ready-file --load --policy --scheduler --device --trials --cold --warm --seed --settle --timeout --abort-factor --rotational --output -o --resume --html"; _bb_job=0;;
        "compare") _bb_subs=""; _bb_opts="-h --help --tolerance"; _bb_job=0;;
        "completion") _bb_subs="bash"; _bb_opts="-h --help"; _bb_job=0;;
        "policies") _bb_subs=""; _bb_opts="-h --help"; _bb_job=0;;
        "report") _bb_subs=""; _bb_opts="-h --help --html --plot --format --violin --export --output -o --tolerance"; _bb_job=0;;
        "restore") _bb_subs=""; _bb_opts="-h --help"; _bb_job=0;;
        "run") _bb_subs=""; _bb_opts="-h --help --policy --io --cpu --io-weight --cpu-weight --no-cgroup --pid --force -v --verbose"; _bb_job=1;;
        "slowdisk") _bb_subs="create list profiles remove stats"; _bb_opts="-h --help"; _bb_job=0;;
        "slowdisk create") _bb_subs=""; _bb_opts="-h --help --profile --size --read-only --scheduler"; _bb_job=0;;
        "slowdisk list") _bb_subs=""; _bb_opts="-h --help"; _bb_job=0;;
        "slowdisk profiles") _bb_subs=""; _bb_opts="-h --help --json"; _bb_job=0;;
        "slowdisk remove") _bb_subs=""; _bb_opts="-h --help"; _bb_job=0;;
        "slowdisk stats") _bb_subs=""; _bb_opts="-h --help --json"; _bb_job=0;;
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
        "bench|--preset") echo "__any__";;
        "bench|--probe") echo "__any__";;
        "bench|--ready-line") echo "__any__";;
        "bench|--ready-file") echo "__any__";;
        "bench|--load") echo "__any__";;
        "bench|--policy") echo "__any__";;
        "bench|--scheduler") echo "__any__";;
        "bench|--device") echo "__any__";;
        "bench|--trials") echo "__any__";;
        "bench|--seed") echo "__any__";;
        "bench|--settle") echo "__any__";;
        "bench|--timeout") echo "__any__";;
        "bench|--abort-factor") echo "__any__";;
        "bench|--rotational") echo "0 1";;
        "bench|--output") echo "__any__";;
        "bench|-o") echo "__any__";;
        "bench|--resume") echo "__any__";;
        "bench|--html") echo "__any__";;
        "compare|--tolerance") echo "__any__";;
        "report|--html") echo "__any__";;
        "report|--plot") echo "__any__";;
        "report|--format") echo "__any__";;
        "report|--export") echo "csv json markdown";;
        "report|--output") echo "__any__";;
        "report|-o") echo "__any__";;
        "report|--tolerance") echo "__any__";;
        "run|--policy") echo "__any__";;
        "run|--io") echo "__any__";;
        "run|--cpu") echo "__any__";;
        "run|--io-weight") echo "__any__";;
        "run|--cpu-weight") echo "__any__";;
        "run|--pid") echo "__any__";;
        "slowdisk create|--profile") echo "__any__";;
        "slowdisk create|--size") echo "__any__";;
        "slowdisk create|--scheduler") echo "__any__";;
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
