# Sourced by the collective benchmarks for their "--name value" options.
#
# bench_options SCRIPT HELP_LINES NAME... -- "$@"
#   Each "--name value" among the arguments sets the shell variable NAME in upper case
#   (--iters 30: ITERS=30); NAME must be one of the names listed. -h/--help prints the
#   calling script's lines HELP_LINES (a sed range such as 2,12) and exits; anything else
#   is an error that names SCRIPT.
bench_options() {
    local script=$1 help=$2 known=" "
    shift 2
    while [[ $1 != -- ]]; do
        known+="$1 "
        shift
    done
    shift
    while [[ $# -gt 0 ]]; do
        case $1 in
        -h | --help)
            sed -n "${help}p" "$0"
            exit 0
            ;;
        --*)
            local name=${1#--}
            if [[ $known == *" $name "* ]]; then
                [[ $# -ge 2 ]] || { echo "$script: $1 needs a value (see --help)" >&2; exit 2; }
                printf -v "${name^^}" '%s' "$2"
                shift 2
                continue
            fi
            ;;
        esac
        echo "$script: unknown argument $1 (see --help)" >&2
        exit 2
    done
}
